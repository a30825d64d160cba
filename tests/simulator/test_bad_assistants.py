"""Bad assistants end their sessions with the right reason and the run completes; a FHIR server failure is
never charged to the assistant."""

from __future__ import annotations

import asyncio

import pytest

from services.fhir_api.store.sql_store import SqlResourceStore
from services.simulator.assistant_protocol import SessionTools, TurnRequest
from services.simulator.orchestrator.entry import RunOptions, run_scenarios
from services.simulator.orchestrator.log import SessionRecorder
from tests.simulator.conftest import jobs, session_events
from tests.wiring import migrated

SAMPLES = "python:tests.simulator.sample_assistants"


def run(settings, scenarios, spec, run_id="bad-run", **options):
    return asyncio.run(run_scenarios(jobs(scenarios), spec, RunOptions(run_id, **options),
                                     migrated(settings)))


class UnknownTool:
    spec = "unknown-tool"

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        call = tools.step("fhir_search", {"resourceType": "Observation"})
        tools.result(call, "fhir_search", output={"total": 0})
        tools.step("drop_tables", {"all": True})
        return "never"

    async def aclose(self) -> None:
        return None


class ToolLooper:
    spec = "tool-looper"

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        for _ in range(20):
            tools.step("fhir_read", {"ref": request.patient})
        return "never"

    async def aclose(self) -> None:
        return None


@pytest.mark.parametrize(
    ("spec", "reason", "detail"),
    [
        (f"{SAMPLES}:sleeps", "timeout", "deadline"),
        (f"{SAMPLES}:sleeps_sync", "timeout", "deadline"),
        (f"{SAMPLES}:raises", "assistant_error", "assistant bug"),
        (f"{SAMPLES}:returns_dict", "assistant_error", "not text"),
        (f"{SAMPLES}:returns_empty", "assistant_error", "not text"),
        (f"{SAMPLES}:invalid_fhir", "assistant_error", "422"),
        (f"{SAMPLES}:loops", "max_steps", "past the limit"),
        (f"{SAMPLES}:loops_and_swallows", "max_steps", "past the limit"),
        (UnknownTool(), "assistant_error", "unknown tool 'drop_tables'"),
        (ToolLooper(), "max_steps", "past the limit"),
    ],
    ids=["async-timeout", "sync-timeout", "raises", "non-text", "empty", "invalid-fhir", "loops",
         "loops-swallowing", "unknown-tool", "tool-loop"],
)
def test_each_bad_assistant_ends_its_session_with_the_right_reason(settings, scenarios, spec, reason, detail):
    # only the sleepers should meet the deadline: the others get one no loaded machine reaches
    summary = run(settings, scenarios, spec, turn_timeout_s=1.0 if reason == "timeout" else 60.0)
    (outcome,) = summary.outcomes
    assert outcome.reason == reason, outcome.error
    assert detail in outcome.error and outcome.turns == 0
    events = session_events(settings, outcome.session_id)
    assert events[-1].type == "rounds.session.ended" and events[-1].data["reason"] == reason
    assert not [e for e in events if e.type == "rounds.message.assistant" and "answer" in str(e.data)]


def test_invalid_fhir_the_assistant_gets_past_is_not_an_error_and_writes_nothing(settings, scenarios):
    (outcome,) = run(settings, scenarios, f"{SAMPLES}:invalid_fhir_carries_on").outcomes
    assert outcome.reason == "completed"
    events = session_events(settings, outcome.session_id)
    statuses = [e.data["status"] for e in events if e.type == "rounds.ehr.response"]
    assert statuses == [422, 422, 422, 422]


def test_unknown_tool_calls_are_recorded_before_the_session_ends(settings, scenarios):
    (outcome,) = run(settings, scenarios, UnknownTool()).outcomes
    events = session_events(settings, outcome.session_id)
    calls = [e.data["name"] for e in events if e.type == "rounds.tool.call"]
    results = [e.data for e in events if e.type == "rounds.tool.result"]
    assert calls == ["fhir_search", "drop_tables"] and results[0]["output"] == {"total": 0}


def test_a_request_outside_the_session_is_refused(settings, scenarios):
    (outcome,) = run(settings, scenarios, f"{SAMPLES}:reads_other_session").outcomes
    events = session_events(settings, outcome.session_id)
    answers = [e.data["payload"][0]["contentString"] for e in events if e.type == "rounds.message.assistant"]
    assert answers == ["status 403"] * 4 and not [e for e in events if e.type.startswith("rounds.ehr.")]


def test_a_fhir_server_failure_is_infrastructure_not_the_assistant(settings, scenarios, monkeypatch):
    def broken(self, ctx, request):
        raise RuntimeError("disk on fire")

    async def broken_async(self, ctx, request):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(SqlResourceStore, "search", broken)
    monkeypatch.setattr(SqlResourceStore, "search_async", broken_async)
    for spec in (f"{SAMPLES}:fhir_lookup_raising", "baseline"):
        (outcome,) = run(settings, scenarios, spec, run_id=f"run-{spec}").outcomes
        assert outcome.reason == "infrastructure_error", (spec, outcome.error)
        assert "HTTP 500" in outcome.error


def test_a_sandbox_that_cannot_be_opened_is_infrastructure_and_the_run_still_completes(settings, scenarios,
                                                                                      monkeypatch):
    monkeypatch.setattr(SqlResourceStore, "create_session", lambda self, now=None: 1 / 0)
    summary = run(settings, scenarios, "baseline")
    assert summary.by_reason == {"infrastructure_error": 1}
    assert summary.outcomes[0].session_id is None and "sandbox" in summary.outcomes[0].error


def test_a_failing_log_is_infrastructure_and_says_where_it_failed(settings, scenarios, monkeypatch):
    """The bus failing mid-session (once) is Rounds' failure: the session ends infrastructure_error, never
    the assistant's, and the error names the frame that raised (a library's message alone is opaque)."""
    real, calls = SessionRecorder._write, []

    def flaky(self, session_id, items):
        calls.append(session_id)
        if len(calls) == 2:  # mid-session, before its last answer
            raise ConnectionError("broker went away")
        return real(self, session_id, items)

    monkeypatch.setattr(SessionRecorder, "_write", flaky)
    (outcome,) = run(settings, scenarios, "baseline", run_id="run-log-fails").outcomes
    assert outcome.reason == "infrastructure_error" and outcome.turns < len(scenarios[0][0].turns), outcome
    assert "broker went away" in outcome.error and "test_bad_assistants.py:" in outcome.error
    assert " in flaky" in outcome.error
