"""The per-session MCP server with the `mcp` SDK's own client, and `mcp:<url>` with an agent behind a webhook,
both against a FHIR app on a real port with a synthetic patient loaded."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass, replace

import httpx
import pytest
from fastapi import FastAPI
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from rounds.settings import Settings
from services.fhir_api.app import create_app
from services.simulator.assistant_protocol import (
    TOOL_NAMES,
    AssistantFailure,
    InfrastructureFailure,
    StepLimitExceeded,
)
from services.simulator.assistants import mcp_agent
from services.simulator.assistants.fhir_tools import toolset
from services.simulator.assistants.mcp_server import TurnRegistry, mount_mcp
from tests.simulator.adapters.conftest import Record, Recorder, Sandbox, Served, free_port
from tests.wiring import store_on

PATIENT_SAYS = "Only my blood pressure pills."


@dataclass
class Live:
    root: str
    app: FastAPI
    registry: TurnRegistry
    record: Record

    def open(self) -> Sandbox:
        session = httpx.post(f"{self.root}/sessions", json={}).json()
        return Sandbox(self.app, session["id"], session["fhirBase"], self.record)


@pytest.fixture(scope="module")
def live(record: Record) -> Iterator[Live]:
    app = create_app(Settings(database_url=record.database_url), store_on(record.database_url))
    registry = TurnRegistry()
    mount_mcp(app, registry)

    @app.post("/sessions/{session_id}/patient")
    async def patient(session_id: str, body: dict) -> dict:  # stands in for the simulator's patient endpoint
        return {"text": f"{PATIENT_SAYS} (asked: {body['text']})"}

    served = Served(app)
    yield Live(served.root, app, registry, record)
    served.stop()


async def mcp_calls(url: str, *calls: tuple[str, dict]) -> tuple[list, list]:
    """Connect with the SDK's client, list the tools, make `calls`; (tools, results)."""
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = (await session.list_tools()).tools
        return listed, [await session.call_tool(name, arguments) for name, arguments in calls]


def body(result) -> dict | str:
    text = result.content[0].text
    try:
        return json.loads(text)
    except ValueError:
        return text


def search_args(record: Record) -> dict:
    params = {"patient": record.patient, "code": record.lab_code, "_count": 50}
    return {"resourceType": "Observation", "params": params}


def test_tools_search_and_patient_over_mcp(live: Live) -> None:
    sandbox = live.open()
    url = mcp_agent.mcp_url(sandbox.fhir_base)
    listed, (found, missing, unknown, asked) = asyncio.run(
        mcp_calls(
            url,
            ("fhir_search", search_args(live.record)),
            ("fhir_read", {"resourceType": "Patient", "id": "nobody"}),
            ("drop_tables", {}),
            ("ask_patient", {"question": "Do you take anything for your heart?"}),
        )
    )
    assert {t.name for t in listed} == TOOL_NAMES
    assert {t.name: t.input_schema for t in listed} == {t.name: t.parameters for t in toolset().tools}
    assert not found.is_error and live.record.lab_id in {r["id"] for r in body(found)["entry"]}
    assert missing.is_error and body(missing)["operationOutcome"]["resourceType"] == "OperationOutcome"
    assert unknown.is_error and body(unknown) == "assistant_error: unknown tool 'drop_tables'"
    assert (
        not asked.is_error and body(asked) == f"{PATIENT_SAYS} (asked: Do you take anything for your heart?)"
    )


def test_unknown_session_is_404_and_fhir_paths_are_untouched(live: Live) -> None:
    response = httpx.post(f"{live.root}/sessions/no-such-session/mcp", json={"jsonrpc": "2.0", "id": 1})
    assert response.status_code == 404
    sandbox = live.open()
    assert httpx.get(f"{sandbox.fhir_base}/Patient/{live.record.patient}").status_code == 200


def test_a_registered_turn_counts_records_and_keeps_the_failure(live: Live) -> None:
    sandbox = live.open()
    recorder = Recorder()

    def limited_step(name: str, arguments: dict) -> str:
        if len(recorder.calls) >= 2:
            raise StepLimitExceeded("step 3 is past the limit of 2")
        return recorder.step(name, arguments)

    async def turn():
        tools = replace(sandbox.tools(recorder), step=limited_step)
        with live.registry.turn(sandbox.session_id, tools) as active:
            _, results = await mcp_calls(
                mcp_agent.mcp_url(sandbox.fhir_base),
                ("fhir_search", search_args(live.record)),
                ("ask_patient", {"question": "Any allergies?"}),
                ("fhir_read", {"resourceType": "Patient", "id": live.record.patient}),
            )
        return active, results

    active, (found, asked, refused) = asyncio.run(turn())
    assert (
        not found.is_error and body(asked) == recorder.patient_reply
    )  # the orchestrator's patient, not HTTP
    assert refused.is_error and body(refused) == "max_steps: step 3 is past the limit of 2"
    assert isinstance(active.failure, StepLimitExceeded)
    assert [name for _, name, _ in recorder.calls] == ["fhir_search", "ask_patient"]
    assert (
        recorder.questions == ["Any allergies?"] and recorder.results[0]["output"]["resourceType"] == "Bundle"
    )
    assert sandbox.session_id not in live.registry.active


@pytest.fixture(scope="module")
def agent(live: Live) -> Iterator[str]:
    """An MCP-capable agent in its own server: the message says what it does; it works through mcpUrl."""
    app = FastAPI()

    @app.post("/agent")
    async def respond(turn: dict) -> dict:
        plan = turn["message"]
        if plan == "crash":
            raise RuntimeError("agent bug")
        calls = {
            "lookup": [("fhir_search", search_args(live.record)), ("ask_patient", {"question": "Any pain?"})],
            "bogus": [("drop_tables", {})],
            "answer-tool": [("answer", {"text": "Answered through MCP."})],
        }[plan]
        _, results = await mcp_calls(turn["mcpUrl"], *calls)
        if plan == "answer-tool":
            return {}
        value = next(r for r in body(results[0])["entry"] if r["id"] == live.record.lab_id)
        return {"text": f"Lab {value['id']} found; patient said: {body(results[1])}"}

    served = Served(app)
    yield f"{served.root}/agent"
    served.stop()


def run_agent(
    spec_url: str, sandbox: Sandbox, registry: TurnRegistry, recorder: Recorder, message: str
) -> str:
    async def turn() -> str:
        assistant = mcp_agent.create(spec_url)
        assistant.registry = registry
        try:
            return await assistant.respond(sandbox.request(message), sandbox.tools(recorder))
        finally:
            await assistant.aclose()

    return asyncio.run(turn())


def test_mcp_agent_end_to_end(live: Live, agent: str) -> None:
    sandbox, recorder = live.open(), Recorder()
    said = run_agent(agent, sandbox, live.registry, recorder, "lookup")
    assert said == f"Lab {live.record.lab_id} found; patient said: {recorder.patient_reply}"
    assert [name for _, name, _ in recorder.calls] == ["fhir_search", "ask_patient"]
    assert recorder.questions == ["Any pain?"]


def test_mcp_agent_failures(live: Live, agent: str) -> None:
    sandbox = live.open()
    with pytest.raises(AssistantFailure, match="unknown tool 'drop_tables'"):
        run_agent(agent, sandbox, live.registry, Recorder(), "bogus")
    with pytest.raises(AssistantFailure, match="HTTP 500"):
        run_agent(agent, sandbox, live.registry, Recorder(), "crash")
    assert run_agent(agent, sandbox, live.registry, Recorder(), "answer-tool") == "Answered through MCP."
    with pytest.raises(InfrastructureFailure, match="unreachable"):
        run_agent(f"http://127.0.0.1:{free_port()}/agent", sandbox, live.registry, Recorder(), "lookup")


def test_the_preflight_names_an_agent_webhook_nobody_serves(agent: str) -> None:
    from services.simulator.assistant_protocol import EndpointUnavailable

    async def probe(url: str) -> str:
        assistant = mcp_agent.create(url)
        try:
            return await assistant.preflight()
        finally:
            await assistant.aclose()

    assert asyncio.run(probe(agent)).startswith(f"{agent} answers (HTTP ")
    closed = f"http://127.0.0.1:{free_port()}/agent"
    with pytest.raises(EndpointUnavailable, match=rf"cannot reach the MCP agent's webhook {closed}"):
        asyncio.run(probe(closed))


def test_spec_and_urls() -> None:
    assert mcp_agent.mcp_url("http://h:1/sessions/abc/fhir/") == "http://h:1/sessions/abc/mcp"
    assert mcp_agent.mcp_url("http://sim:2/sessions/abc/patient") == "http://sim:2/sessions/abc/mcp"
    for bad in ["http://h:1/fhir-nope", "http://h:1/patient"]:
        with pytest.raises(ValueError, match="not a session endpoint"):
            mcp_agent.mcp_url(bad)
    with pytest.raises(ValueError, match="expected mcp:"):
        mcp_agent.create("ftp://agent")
    assistant = mcp_agent.create("http://127.0.0.1:1/agent")
    assert assistant.spec == "mcp:http://127.0.0.1:1/agent" and assistant.needs_network
    asyncio.run(assistant.aclose())


def test_the_mount_starts_without_a_lifespan_and_stops(record: Record) -> None:
    """As the simulator serves it (uvicorn in its own loop, lifespan off): the first request starts the SDK's
    session manager, `aclose` stops it."""
    import uvicorn

    async def scenario() -> None:
        app = create_app(Settings(database_url=record.database_url), store_on(record.database_url))
        mount = mount_mcp(app, TurnRegistry())
        port = free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
        server = uvicorn.Server(config)
        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            session = (await client.post("/sessions", json={})).json()
        listed, _ = await mcp_calls(mcp_agent.mcp_url(session["fhirBase"]))
        assert len(listed) == len(TOOL_NAMES) and mount._runner is not None and not mount._runner.done()
        await mount.aclose()
        assert mount._runner.done()
        server.should_exit = True
        await task

    asyncio.run(scenario())
