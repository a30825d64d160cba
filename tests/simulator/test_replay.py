"""`rounds replay`: a recorded run's sessions again — same scenarios, clocks, trials, languages — against
another assistant in fresh sandboxes, as a new run that points at the original."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from services.simulator.orchestrator.entry import RunOptions, run_scenarios
from services.simulator.orchestrator.jobs import recorded_sessions
from services.simulator.orchestrator.replay import replay_jobs
from tests.simulator.conftest import jobs, session_events
from tests.wiring import bus_on, migrated

pytestmark = pytest.mark.slow  # whole pipelines, subprocesses or real services: not in the fast lane

REPO = Path(__file__).resolve().parents[2]


def test_a_run_replays_from_the_log_against_another_assistant(settings, scenarios):
    original = asyncio.run(run_scenarios(jobs(scenarios, trials=2, languages=("en", "zh")), "weak",
                                         RunOptions("run-original"), migrated(settings)))
    bus = bus_on(settings)
    try:
        replayed, causation = replay_jobs(bus, "run-original")
        one, _ = replay_jobs(bus, "run-original", original.outcomes[0].session_id)
    finally:
        bus.close()
    assert sorted(j.key for j in replayed) == sorted(o.job.key for o in original.outcomes)
    assert [j.key for j in one] == [original.outcomes[0].job.key]
    assert {j.digest for j in replayed} == {original.outcomes[0].job.digest}
    env = {**os.environ, "ROUNDS_DATABASE_URL": settings.database_url, "ROUNDS_BUS": "sql"}
    command = ["replay", "--run", "run-original", "--assistant", "oracle", "--run-id", "run-replayed"]
    done = subprocess.run([sys.executable, "-m", "rounds.cli", *command], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "replaying 4 sessions of run-original" in done.stdout
    bus = bus_on(settings)
    try:
        new, _ = replay_jobs(bus, "run-replayed")
    finally:
        bus.close()
    assert sorted(j.key for j in new) == sorted(j.key for j in replayed)
    started_by_key = {o.job.key: session_events(settings, o.session_id)[0].id for o in original.outcomes}
    bus = bus_on(settings)
    try:
        sessions = recorded_sessions(bus, "run-replayed")
    finally:
        bus.close()
    assert len(sessions) == 4 and all(s.ended == "completed" for s in sessions.values())
    for session in sessions.values():
        first = session_events(settings, session.session_id)[0]
        assert first.data["replayOf"] == "run-original" and first.data["assistant"] == "oracle"
        assert first.causationid == started_by_key[session.key]  # the original session of the same job
        assert first.data["asOf"].startswith("2150-01-02T12:00:00")
