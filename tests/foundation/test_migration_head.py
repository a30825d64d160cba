"""One migration head: `alembic upgrade head`, as every alembic user types it, works on both databases."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import inspect

from foundation.db import make_engine
from rounds.migrate import REPO_ROOT, alembic_config

pytestmark = pytest.mark.slow  # whole pipelines, subprocesses or real services: not in the fast lane


def test_the_history_has_a_single_head() -> None:
    heads = ScriptDirectory.from_config(alembic_config("sqlite://")).get_heads()
    assert len(heads) == 1, f"several migration heads {heads}: add a merge revision"


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_alembic_upgrade_head_from_the_command_line(backend: str, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("sqlite_url" if backend == "sqlite" else "postgres_url")
    env = {**os.environ, "ROUNDS_DATABASE_URL": url}
    done = subprocess.run(
        [sys.executable, "-m", "alembic", "-c", str(REPO_ROOT / "alembic.ini"), "upgrade", "head"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    engine = make_engine(url)
    try:
        tables = set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
    # one table of each former branch: the store, the event log, the outbox
    assert {"fhir_resource", "alembic_version"} <= tables
    assert any(t.startswith("event_log") for t in tables) and any("outbox" in t for t in tables), tables
