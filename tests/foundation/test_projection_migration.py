"""The default group's projection and score tables come from alembic (0019_projection_tables): a fresh
`rounds db upgrade` creates them, a store whose runner made them before that revision upgrades to the same
tables with its rows, and a runner never creates them itself (a replay's suffixed copies excepted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, inspect, select

from events.projections.fhir_changes import FhirChangesProjection
from events.projections.projection import Projection
from events.projections.transcript import TranscriptProjection
from rounds.migrate import upgrade
from services.consumers.scoring.projection import ScorerProjection

BEFORE = "0018_auth_oidc"  # the last revision whose projection tables the runner made


def _projections(suffix: str = "") -> list[Projection]:
    return [TranscriptProjection(suffix), FhirChangesProjection(suffix), ScorerProjection(suffix)]


def _shape(engine: Engine) -> dict[str, tuple]:
    """Per projection table: its columns (name, type, nullable) and primary key, as the database has them."""
    found = inspect(engine)
    return {
        name: (
            [(c["name"], str(c["type"]), c["nullable"]) for c in found.get_columns(name)],
            found.get_pk_constraint(name)["constrained_columns"],
        )
        for name in sorted(found.get_table_names())
        if name.startswith("proj_")
    }


def test_a_fresh_rounds_db_upgrade_creates_every_default_table(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.sqlite'}"
    done = subprocess.run([sys.executable, "-m", "rounds.cli", "db", "upgrade", "--database-url", url],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    engine = create_engine(url)
    declared = {name for p in _projections() for name in p.metadata.tables}
    assert declared == set(_shape(engine)), "every default projection table, and no other"
    for projection in _projections():
        projection.create_tables(engine)  # finds them: nothing to create, nothing to say
    engine.dispose()


def test_an_old_store_upgrades_to_the_same_tables_with_its_rows(tmp_path: Path) -> None:
    old_url, fresh_url = f"sqlite:///{tmp_path / 'old.sqlite'}", f"sqlite:///{tmp_path / 'fresh.sqlite'}"
    upgrade(old_url, BEFORE)
    old = create_engine(old_url)
    for projection in _projections():  # what the runner did before 0019
        projection.metadata.create_all(old)
    scores = ScorerProjection().tables["score_versions"]
    with old.begin() as conn:
        conn.execute(scores.insert().values(run_id="r1", scorer_version="4", first_scored="2026-12-07"))
    upgrade(old_url)
    upgrade(fresh_url)
    fresh = create_engine(fresh_url)
    try:
        assert _shape(old) == _shape(fresh)
        assert len(_shape(fresh)) == 8
        with old.connect() as conn:
            assert conn.execute(select(scores.c.run_id, scores.c.scorer_version)).all() == [("r1", "4")]
    finally:
        old.dispose()
        fresh.dispose()


def test_the_runner_asks_for_the_migration_and_creates_only_a_replays_tables(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'bare.sqlite'}")
    with pytest.raises(RuntimeError, match="rounds db upgrade") as raised:
        TranscriptProjection().create_tables(engine)
    assert "proj_transcript_entries" in str(raised.value)
    assert inspect(engine).get_table_names() == []
    TranscriptProjection("r2").create_tables(engine)  # a replay's fresh group
    made = sorted(inspect(engine).get_table_names())
    assert made == ["proj_transcript_entries_r2", "proj_transcript_sessions_r2"]
    engine.dispose()
