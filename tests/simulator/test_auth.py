"""The simulator with the FHIR API's access control on (ROUNDS_AUTH=on): it opens sessions with its own
deployment token and hands each assistant exactly its session's token, which works on that sandbox only."""

from __future__ import annotations

import asyncio

from fastapi.testclient import TestClient

from services.fhir_api.auth.tokens import verify
from services.simulator.assistant_protocol import SessionTools, TurnRequest
from services.simulator.orchestrator.entry import RunOptions, run_scenarios
from tests.simulator.conftest import jobs, session_events
from tests.wiring import app_on, migrated


class TokenProbe:
    """Records the token of each turn and reads the record with the client the orchestrator gave it."""

    spec = "token-probe"

    def __init__(self) -> None:
        self.seen: dict[str, set[str | None]] = {}

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        self.seen.setdefault(request.session_id, set()).add(request.access_token)
        mine = await tools.http.get("Observation", params={"patient": request.patient})
        assert mine.status_code == 200, mine.text
        return f"{len(mine.json().get('entry', []))} results"

    async def aclose(self) -> None:
        return None


def test_assistants_run_with_session_tokens_when_auth_is_on(settings, scenarios):
    secured = settings.model_copy(update={"auth": True})
    probe = TokenProbe()
    options = RunOptions("run-auth", concurrency=2)
    summary = asyncio.run(run_scenarios(jobs(scenarios, trials=2), probe, options, migrated(secured)))
    assert summary.by_reason == {"completed": 2}, {o.error for o in summary.outcomes}
    app = app_on(secured)
    for outcome in summary.outcomes:
        (token,) = probe.seen[outcome.session_id]  # the same token every turn
        grant = verify(app.state.auth.key, token)
        # bound to the session and, as a SMART launch, to the scenario's patient
        assert grant.session == outcome.session_id
        assert grant.patient == outcome.job.scenario.patient.removeprefix("Patient/")
        events = session_events(secured, outcome.session_id)
        statuses = [e.data["status"] for e in events if e.type == "rounds.ehr.response"]
        assert statuses and set(statuses) == {200}, statuses
    with TestClient(app) as client:
        one, headers = summary.outcomes[0].session_id, {"Authorization": f"Bearer {token}"}
        assert token in probe.seen[summary.outcomes[1].session_id]
        assert client.get(f"/sessions/{one}/fhir/Observation").status_code == 401
        # the other session's token, then the shared record
        assert client.get(f"/sessions/{one}/fhir/Observation", headers=headers).status_code == 403
        assert client.get("/fhir/Observation", headers=headers).status_code == 403
        last = summary.outcomes[1].session_id  # its own session ended with the run: revoked with it
        ended = client.get(f"/sessions/{last}/fhir/Observation", headers=headers)
        assert ended.status_code == 410 and ended.json()["issue"][0]["code"] == "expired"


def test_built_in_and_python_assistants_complete_with_auth_on(settings, scenarios):
    secured = settings.model_copy(update={"auth": True})
    for spec in ("baseline", "python:tests.simulator.sample_assistants:sync_lookup"):
        summary = asyncio.run(run_scenarios(jobs(scenarios[:1]), spec, RunOptions(f"run-auth-{spec[:8]}"),
                                            migrated(secured)))
        assert summary.by_reason == {"completed": 1}, (spec, {o.error for o in summary.outcomes})
        events = session_events(secured, summary.outcomes[0].session_id)
        assert {e.data["status"] for e in events if e.type == "rounds.ehr.response"} <= {200, 201}
