"""`rounds run` with auth on and a hostile stateful assistant (hostile_assistant.py) over sessions of two
patients, one of them at two clocks, served on a real port: every token and base it kept, tried every turn
against every surface, gets nothing beyond its session's patient and clock — sessions are bound to their
scenario's patient, their tokens die with them (checked again after the run), and one patient never has two
clocks open at once. Plus PatientClocks itself: same clock together, another clock waits."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient

from rounds.settings import Settings
from services.simulator.orchestrator.entry import RunOptions, run_scenarios
from services.simulator.orchestrator.jobs import plan, read_scenarios
from services.simulator.orchestrator.patient_clocks import PatientClocks
from tests.fhir_api.conftest import token_claims
from tests.security import hostile_assistant
from tests.simulator.conftest import SCENARIOS
from tests.wiring import app_on, migrated

pytestmark = pytest.mark.slow  # a whole run


STAY = "Encounter/sim-stay-1"  # sim-p1's stay: the launch context of its sessions


def _second_patient(settings: Settings) -> None:
    """sim-p2 with a creatinine of its own in the shared record; sim-p1's stay."""
    with TestClient(app_on(settings)) as client:
        stay = {"resourceType": "Encounter", "id": STAY.split("/")[1], "status": "in-progress",
                "class": {"code": "IMP"}, "subject": {"reference": "Patient/sim-p1"},
                "period": {"start": "2150-01-01T00:00:00Z"}}
        assert client.put(f"/fhir/{STAY}", json=stay).status_code in (200, 201)
        p1 = client.get("/fhir/Patient/sim-p1").json()
        assert client.put("/fhir/Patient/sim-p2", json={**p1, "id": "sim-p2"}).status_code in (200, 201)
        lab = client.get("/fhir/Observation/sim-cr-1").json()
        lab = {**lab, "id": "sim-p2-cr", "subject": {"reference": "Patient/sim-p2"}}
        assert client.put("/fhir/Observation/sim-p2-cr", json=lab).status_code in (200, 201)


def _lines(tmp_path):
    """The fixture scenario later (first), for sim-p2, and at its own clock (last)."""
    (line,) = [json.loads(text) for text in SCENARIOS.read_text().splitlines() if text.strip()]
    line = {**line, "encounter": STAY}
    later = {**line, "id": "sim-apixaban-later", "now": "2150-01-04T12:00:00Z"}
    other = {**line, "id": "sim-apixaban-p2", "patient": "Patient/sim-p2", "encounter": None}
    path = tmp_path / "scenarios.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in (later, other, line)))
    return read_scenarios(path)


def test_a_hostile_stateful_assistant_reads_nothing_beyond_its_session(record_url, tmp_path):
    _second_patient(Settings(database_url=record_url))
    settings = Settings(database_url=record_url, auth=True)
    hostile_assistant.SEEN.clear()
    tally = hostile_assistant.TALLY = hostile_assistant.Tally("hostile stateful assistant")
    # network: the app on a real port, so the assistant's own client reaches every surface of the server
    options = RunOptions("run-hostile", concurrency=2, max_steps=100_000, network=True)
    summary = asyncio.run(run_scenarios(plan(_lines(tmp_path), 1, ("en",), "implicit"),
                                        "python:tests.security.hostile_assistant:hoard", options,
                                        migrated(settings)))
    assert summary.by_reason == {"completed": 3}, {o.error for o in summary.outcomes}
    assert len(hostile_assistant.SEEN) == 3
    # each session was launched with its scenario's stay as context (sim-p2's scenario names none)
    stays = sorted(str(token_claims(kept["token"]).get("encounter"))
                   for kept in hostile_assistant.SEEN.values())
    assert stays == ["None", STAY.split("/")[1], STAY.split("/")[1]]
    with TestClient(app_on(settings)) as http:  # the run is over: every token it kept is dead everywhere
        for kept in hostile_assistant.SEEN.values():
            bearer = {"Authorization": f"Bearer {kept['token']}"}
            for place in hostile_assistant.SEEN.values():
                path = "/sessions/" + place["base"].split("/sessions/", 1)[1]
                answer = http.get(f"{path}/Observation", headers=bearer)
                tally.attempt("kept token after the run", answer.is_success, place["base"])
                if place is kept:
                    assert answer.status_code == 410, answer.text  # ended, and says so
    tally.assert_none(at_least=150)


def test_patient_clocks_run_one_clock_of_a_patient_at_a_time():
    t0 = datetime(2150, 1, 2, tzinfo=UTC)
    clocks, log = PatientClocks(), []

    async def session(patient: str, now: datetime, name: str) -> None:
        async with clocks.hold(patient, now):
            log.append(f"+{name}")
            await asyncio.sleep(0.05)
            log.append(f"-{name}")

    async def main() -> None:
        await asyncio.gather(session("p1", t0, "a"), session("p1", t0, "b"),
                             session("p1", t0 + timedelta(days=1), "late"), session("p2", t0, "other"))

    asyncio.run(main())
    late = log.index("+late")
    assert log.index("-a") < late and log.index("-b") < late  # waited for both sessions at the other clock
    assert log.index("+b") < log.index("-a")  # the same clock ran together
    assert log.index("+other") < log.index("-a")  # another patient never waits
