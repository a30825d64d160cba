"""`openai:` and `mcp:` through the orchestrator: `rounds run` against the OpenAI-compatible server this test
starts, and an MCP agent behind a webhook; the session log holds the tool calls, EHR calls and answers in
order (simulator fixtures: tests/simulator/fixtures, patient sim-p1, 4 turns)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI

from events.payloads import Communication
from services.simulator.orchestrator.entry import RunOptions, run_scenarios
from tests.simulator.adapters.conftest import Served
from tests.simulator.adapters.fake_openai import FakeOpenAI, text, tool_call
from tests.simulator.adapters.test_mcp import mcp_calls
from tests.simulator.conftest import SCENARIOS, assert_session_order, jobs, session_events
from tests.wiring import migrated

pytestmark = pytest.mark.slow  # whole pipelines, subprocesses or real services: not in the fast lane

REPO = Path(__file__).resolve().parents[3]
CREATININE = "http://mimic.mit.edu/fhir/mimic/CodeSystem/mimic-d-labitems|50912"


def lab_values(bundle: dict) -> list:
    return [r["valueQuantity"]["value"] for r in bundle.get("entry", []) if "valueQuantity" in r]


@pytest.fixture
def model() -> Iterator[tuple[FakeOpenAI, str]]:
    """A model that searches the creatinine of the patient in its system prompt, then answers with it."""
    fake = FakeOpenAI()

    def step(body: dict) -> tuple:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return text(fake, f"creatinine values {lab_values(json.loads(last['content']))}")
        patient = re.search(r"Patient/([A-Za-z0-9\-.]+)", body["messages"][0]["content"])[1]
        params = {"patient": patient, "code": CREATININE, "_sort": "-date"}
        return tool_call(fake, "fhir_search", {"resourceType": "Observation", "params": params})

    fake.reset(step)
    served = Served(fake.app)
    yield fake, f"{served.root}/v1"
    served.stop()


def check_log(events: list) -> list[str]:
    """The session's order, every tool call paired with its result; the answers."""
    assert_session_order(events, turns=4)
    calls = [e for e in events if e.type == "rounds.tool.call"]
    results = {e.data["callId"]: e.data for e in events if e.type == "rounds.tool.result"}
    assert calls and all(c.data["callId"] in results for c in calls)
    types = [e.type for e in events]
    first_call = types.index("rounds.tool.call")
    assert types[first_call + 1 : first_call + 4] == [
        "rounds.ehr.request",
        "rounds.ehr.response",
        "rounds.tool.result",
    ]
    said = [Communication.model_validate(e.data) for e in events if e.type == "rounds.message.assistant"]
    return [m.text for m in said if m.kind == "answer"]


def test_rounds_run_with_an_openai_assistant(settings, model) -> None:
    fake, base = model
    env = {**os.environ, "ROUNDS_DATABASE_URL": settings.database_url, "ROUNDS_BUS": "sql"}
    env.pop("OPENAI_API_KEY", None)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rounds.cli",
            "run",
            "--scenarios",
            str(SCENARIOS),
            "--run-id",
            "run-openai",
            "--assistant",
            f"openai:fake-model@{base}",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "run-openai" in done.stdout and "completed" in done.stdout
    started = [e for e in session_events(settings, None) if e.type == "rounds.session.started"]
    (session,) = [e.subject for e in started if e.data["runId"] == "run-openai"]
    logged = session_events(settings, session)
    ended = next(i for i, e in enumerate(logged) if e.type == "rounds.session.ended")
    events, after = logged[: ended + 1], logged[ended + 1 :]
    assert {e.type for e in after} <= {"rounds.sandbox.state"}  # what `rounds run`'s scoring appends
    assert events[0].data["assistant"] == f"openai:fake-model@{base}"
    assert events[-1].data["reason"] == "completed"
    answers = check_log(events)
    assert answers[0] == "creatinine values [1.6, 1.1]"  # the sandbox clock hides the later creatinine
    results = [e.data for e in events if e.type == "rounds.tool.result"]
    assert results[0]["name"] == "fhir_search" and results[0]["usage"]["total_tokens"] == 60
    assert len(fake.requests) == 8  # per turn: the search, then the answer


@pytest.fixture
def agent() -> Iterator[str]:
    """An MCP agent: searches the creatinine through the session's MCP endpoint and asks about ibuprofen."""
    app = FastAPI()

    @app.post("/agent")
    async def respond(turn: dict) -> dict:
        params = {"patient": turn["patient"].split("/")[1], "code": CREATININE, "_sort": "-date"}
        _, (found, said) = await mcp_calls(
            turn["mcpUrl"],
            ("fhir_search", {"resourceType": "Observation", "params": params}),
            ("ask_patient", {"question": "Do you take ibuprofen?"}),
        )
        values = lab_values(json.loads(found.content[0].text))
        return {"text": f"creatinine values {values}; patient: {said.content[0].text}"}

    served = Served(app)
    yield f"{served.root}/agent"
    served.stop()


def test_a_run_with_an_mcp_agent(settings, scenarios, agent) -> None:
    summary = asyncio.run(run_scenarios(jobs(scenarios), f"mcp:{agent}", RunOptions("run-mcp"),
                                        migrated(settings)))
    (outcome,) = summary.outcomes
    assert (outcome.reason, outcome.turns, outcome.error) == ("completed", 4, None)
    events = session_events(settings, outcome.session_id)
    answers = check_log(events)
    assert answers[0].startswith("creatinine values [1.6, 1.1]; patient: ") and "ibuprofen" in answers[0]
    names = [e.data["name"] for e in events if e.type == "rounds.tool.call"]
    assert names == ["fhir_search", "ask_patient"] * 4
    patient = [Communication.model_validate(e.data) for e in events if e.type == "rounds.message.patient"]
    assert len(patient) == 4 and patient[0].disclosed_facts == ["m-ibu"]


def test_the_answer_is_not_a_tool_step(settings, scenarios, model) -> None:
    """A model that uses all of its `max_steps` tool steps and then answers completes the turn: the answer
    (recorded as an `answer` call for its usage) is not counted against the budget."""
    _, base = model
    options = RunOptions("run-budget", max_steps=1)
    summary = asyncio.run(run_scenarios(jobs(scenarios), f"openai:fake-model@{base}", options,
                                        migrated(settings)))
    (outcome,) = summary.outcomes
    assert (outcome.reason, outcome.turns, outcome.error) == ("completed", 4, None)


def test_an_mcp_agent_against_a_separate_fhir_server(settings, scenarios, agent) -> None:
    """With `--fhir-base` the simulator serves the MCP endpoint beside the patient endpoint on its own port;
    the tools call the separate FHIR server over HTTP."""
    from tests.wiring import app_on

    fhir = Served(app_on(settings))
    try:
        options = RunOptions("run-mcp-remote", fhir_base=f"{fhir.root}/fhir")
        summary = asyncio.run(run_scenarios(jobs(scenarios), f"mcp:{agent}", options, migrated(settings)))
    finally:
        fhir.stop()
    (outcome,) = summary.outcomes
    assert (outcome.reason, outcome.turns, outcome.error) == ("completed", 4, None)
    events = session_events(settings, outcome.session_id)
    assert [e.data["name"] for e in events if e.type == "rounds.tool.call"] == [
        "fhir_search",
        "ask_patient",
    ] * 4
    said = [Communication.model_validate(e.data) for e in events if e.type == "rounds.message.assistant"]
    assert [m.text for m in said if m.kind == "answer"][0].startswith(
        "creatinine values [1.6, 1.1]; patient: "
    )
