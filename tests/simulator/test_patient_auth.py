"""The endpoints the simulator serves itself next to a separate `rounds serve` (`--fhir-base`): with auth on
they demand the session's bearer token exactly as the FHIR server does (401 without a valid token, 403 with
another session's or an unscoped one), and with auth off they stay open. Over real HTTP: the FHIR server on
its own port, the simulator's patient / MCP endpoint on another."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from foundation.db import make_engine
from rounds.settings import Settings
from services.fhir_api.auth import deployment_key, endpoint_auth, service_headers
from services.fhir_api.auth.scopes import parse_scopes
from services.fhir_api.auth.tokens import issue
from services.simulator.assistant_protocol import SessionTools, TurnRequest
from services.simulator.orchestrator import environment
from services.simulator.orchestrator.entry import RunOptions, run_scenarios
from tests.simulator.adapters.conftest import Served
from tests.simulator.conftest import jobs, session_events
from tests.wiring import app_on, migrated

QUESTION = {"text": "Do you take any painkillers, ibuprofen?"}


def tampered(token: str) -> str:
    """The token with its claims rewritten to a managing scope, the signature kept."""
    head, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["scope"] = "system/*.cruds"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{head}.{forged}.{signature}"


class PatientEndpointProbe:
    """In its first turn, asks the patient over HTTP at the session's patient URL once per token in `make`
    (label -> token or None), keeping each answer; then answers."""

    spec = "patient-endpoint-probe"

    def __init__(self, make) -> None:
        self.make = make
        self.answers: dict[str, httpx.Response] = {}

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        if request.turn == 0:
            async with httpx.AsyncClient(timeout=30) as client:
                for label, token in self.make(request).items():
                    headers = {"Authorization": f"Bearer {token}"} if token else {}
                    answer = await client.post(request.patient_url, json=QUESTION, headers=headers)
                    self.answers[label] = answer
        return "probed"

    async def aclose(self) -> None:
        return None


@pytest.fixture
def secured(settings: Settings) -> Settings:
    return settings.model_copy(update={"auth": True})


@pytest.fixture
def fhir_server(secured: Settings) -> Iterator[str]:
    """A separate FHIR server (auth on) on a real port, on the simulator's database."""
    served = Served(app_on(secured))
    try:
        yield served.root
    finally:
        served.stop()


def run_probe(settings: Settings, scenarios, root: str, probe: PatientEndpointProbe, run_id: str):
    """One session run against the FHIR server at `root`, the patient endpoint served on its own port."""
    options = RunOptions(run_id, fhir_base=f"{root}/fhir", network=True)
    return asyncio.run(run_scenarios(jobs(scenarios[:1]), probe, options, migrated(settings)))


def test_the_simulators_patient_endpoint_demands_the_sessions_token(secured, scenarios, fhir_server) -> None:
    engine = make_engine(secured.database_url)
    key = deployment_key(secured, engine)  # the key `rounds serve` signs with (kept in the database)
    opened = httpx.post(f"{fhir_server}/sessions", json={}, headers=service_headers(secured, engine))
    assert opened.status_code == 201, opened.text
    other = opened.json()["accessToken"]
    unscoped = issue(key, parse_scopes("user/*.rs"), expires_in=600)  # unbound, but no `c`

    def tokens(request: TurnRequest) -> dict[str, str | None]:
        own = request.access_token
        assert own
        expired = issue(key, parse_scopes("user/*.cruds"), expires_in=-60, session=request.session_id)
        return {"none": None, "tampered": tampered(own), "expired": expired, "other": other,
                "unscoped": unscoped, "own": own}

    probe = PatientEndpointProbe(tokens)
    summary = run_probe(secured, scenarios, fhir_server, probe, "run-patient-auth")
    (outcome,) = summary.outcomes
    assert outcome.reason == "completed", outcome.error
    answers = probe.answers
    assert answers["own"].status_code == 200 and answers["own"].json()["text"].strip()
    for label, status in (("none", 401), ("tampered", 401), ("expired", 401), ("other", 403),
                          ("unscoped", 403)):
        refused = answers[label]
        assert refused.status_code == status, (label, refused.text)
        assert refused.json()["resourceType"] == "OperationOutcome", label
        assert refused.headers["www-authenticate"].startswith('Bearer realm="rounds"'), label
    assert 'error="invalid_token"' in answers["expired"].headers["www-authenticate"]
    assert 'error="invalid_token"' in answers["tampered"].headers["www-authenticate"]
    assert 'error="insufficient_scope"' in answers["other"].headers["www-authenticate"]
    # only the own token's question reached the patient
    events = session_events(secured, outcome.session_id)
    assert [e.type for e in events].count("rounds.message.patient") == 1


def test_with_auth_off_the_patient_endpoint_stays_open(settings, scenarios) -> None:
    assert endpoint_auth(settings, make_engine(settings.database_url)) is None
    served = Served(app_on(settings))
    try:
        probe = PatientEndpointProbe(lambda request: {"none": None})
        summary = run_probe(settings, scenarios, served.root, probe, "run-patient-open")
    finally:
        served.stop()
    assert summary.by_reason == {"completed": 1}, [o.error for o in summary.outcomes]
    assert probe.answers["none"].status_code == 200, probe.answers["none"].text


async def list_tools(url: str, token: str) -> list[str]:
    client = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with client, streamable_http_client(url, http_client=client) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        return [tool.name for tool in (await session.list_tools()).tools]


def test_the_simulators_mcp_endpoint_demands_the_sessions_token(secured, fhir_server) -> None:
    async def probe() -> tuple[list[int], list[str]]:
        engine = make_engine(secured.database_url)
        env = await environment.remote(fhir_server, secured, network=True, mcp=True,
                                       headers=service_headers(secured, engine),
                                       auth=endpoint_auth(secured, engine))
        try:
            mine, _ = await env.open_session(datetime(2300, 1, 1, tzinfo=UTC))
            other, _ = await env.open_session(datetime(2300, 1, 1, tzinfo=UTC))
            url = f"{env.patient_root}/sessions/{mine}/mcp"
            call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            statuses = []
            async with httpx.AsyncClient(timeout=30) as client:
                for token in (None, env.access_tokens[other], tampered(env.access_tokens[mine])):
                    headers = {"Authorization": f"Bearer {token}"} if token else {}
                    statuses.append((await client.post(url, json=call, headers=headers)).status_code)
            return statuses, await list_tools(url, env.access_tokens[mine])
        finally:
            await env.close()

    statuses, tools = asyncio.run(probe())
    assert statuses == [401, 403, 401]
    assert "fhir_search" in tools and "ask_patient" in tools
