"""100 concurrent sessions: no sandbox write of one session is visible in another or in /fhir."""

from __future__ import annotations

import asyncio

import pytest
from fastapi.testclient import TestClient

from services.simulator.orchestrator.entry import RunOptions, run_scenarios
from tests.simulator.conftest import jobs, session_events
from tests.wiring import app_on, migrated

pytestmark = pytest.mark.slow  # whole pipelines, subprocesses or real services: not in the fast lane


def test_a_hundred_concurrent_sessions_see_only_their_own_writes(settings, scenarios):
    plan = jobs(scenarios, trials=100)
    summary = asyncio.run(run_scenarios(plan, "python:tests.simulator.sample_assistants:writes_note",
                                        RunOptions("run-isolation", concurrency=100), migrated(settings)))
    assert summary.by_reason == {"completed": 100}, {o.error for o in summary.outcomes}
    assert len({o.session_id for o in summary.outcomes}) == 100
    for outcome in summary.outcomes[::9]:
        answers = [e.data["payload"][0]["contentString"] for e in session_events(settings, outcome.session_id)
                   if e.type == "rounds.message.assistant"]
        # Every turn wrote a note and then listed whose notes the session can see: only its own.
        assert answers == [outcome.session_id] * 4
    with TestClient(app_on(settings)) as client:
        shared = client.get("/fhir/Communication", params={"subject": "Patient/sim-p1", "_total": "accurate"})
        one = summary.outcomes[0].session_id
        own = client.get(f"/sessions/{one}/writes")
        base = client.get(f"/sessions/{one}/fhir/Communication")
    assert shared.json()["total"] == 0
    assert own.json()["total"] == 4  # kept after the session ended, for the scorer
    assert base.status_code == 410  # ... whose base answers no more
