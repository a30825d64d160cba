"""`rounds events project|replay|relay` on the embedded backend (SQLite + SQL log), including bad input."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from events.projections.transcript import TranscriptProjection
from events.topics import SESSIONS
from rounds.cli import app
from rounds.migrate import upgrade
from rounds.settings import Settings
from services.fhir_api.backbone.changes import outbox_listener
from services.fhir_api.store.interface import Context
from tests.events.projections.helpers import interleave, session_events, session_id, snapshot
from tests.wiring import bus_on, store_on


def test_project_replay_relay_commands(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    bus = bus_on(Settings(database_url=sqlite_url), ensure_topics=True)
    streams = [session_events(session_id(), turns=1) for _ in range(3)]
    bus.publish_many(SESSIONS, list(interleave(streams)))
    cli = CliRunner(env={"ROUNDS_DATABASE_URL": sqlite_url, "ROUNDS_BUS": "sql"})

    project = cli.invoke(app, ["events", "project", "transcript", "--until-caught-up"])
    assert project.exit_code == 0, project.output
    assert json.loads(project.output.strip().splitlines()[-1])["applied"] == 18

    replayed = cli.invoke(app, ["events", "replay", "transcript", "--suffix", "check1"])
    assert replayed.exit_code == 0, replayed.output
    report = json.loads(replayed.output)
    assert report["tables"] == ["proj_transcript_sessions_check1", "proj_transcript_entries_check1"]
    from foundation.db import make_engine

    engine = make_engine(sqlite_url)
    assert snapshot(engine, TranscriptProjection(suffix="check1")) == snapshot(engine, TranscriptProjection())

    store = store_on(sqlite_url)
    store.add_change_listener(outbox_listener)
    store.create(Context(), {"resourceType": "Patient", "gender": "male"})
    relayed = cli.invoke(app, ["events", "relay", "--once"])
    assert relayed.exit_code == 0, relayed.output
    assert json.loads(relayed.output) == {"published": 1}
    engine.dispose()
    bus.close()


def test_bad_input_is_refused_clearly(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    cli = CliRunner(env={"ROUNDS_DATABASE_URL": sqlite_url, "ROUNDS_BUS": "sql"})
    unknown = cli.invoke(app, ["events", "replay", "no-such-projection"])
    assert unknown.exit_code != 0 and "unknown projection" in unknown.output
    bad_suffix = cli.invoke(app, ["events", "replay", "transcript", "--suffix", "x;drop"])
    assert bad_suffix.exit_code != 0
    assert "suffix must be letters" in bad_suffix.output
    bad_batch = cli.invoke(app, ["events", "project", "--batch-size", "0"])
    assert bad_batch.exit_code != 0


def test_commands_refuse_a_database_without_the_schema(tmp_path) -> None:
    empty = f"sqlite:///{tmp_path / 'empty.sqlite'}"
    cli = CliRunner(env={"ROUNDS_DATABASE_URL": empty, "ROUNDS_BUS": "sql"})
    for command in (["project"], ["replay"], ["relay", "--once"]):
        result = cli.invoke(app, ["events", *command])
        assert result.exit_code == 2, result.output
        assert "run `rounds db upgrade`" in result.output
