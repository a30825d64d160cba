"""`openai:` end to end: the real `openai` SDK against an OpenAI-compatible server this test starts, tool
calls running against a sandbox loaded with a synthetic patient."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest

from services.simulator.assistants import openai_chat
from services.simulator.assistants.openai_chat import OpenAIChatAssistant, RetryPolicy, create
from services.simulator.data_model import (
    TOOL_NAMES,
    Assistant,
    AssistantFailure,
    HistoryItem,
    InfrastructureFailure,
    StepLimitExceeded,
)
from tests.simulator.adapters.conftest import Recorder, Sandbox, Served
from tests.simulator.adapters.fake_openai import FakeOpenAI, error, text, tool_call

FAST = RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.05, retry_statuses=frozenset({408, 409, 429}))


@pytest.fixture(scope="module")
def fake() -> Iterator[tuple[FakeOpenAI, str]]:
    server = FakeOpenAI()
    served = Served(server.app)
    yield server, f"{served.root}/v1"
    served.stop()


def respond(base_url: str, sandbox: Sandbox, recorder: Recorder, message: str, **request) -> str:
    """One turn through a fresh adapter (its client lives on this test's event loop)."""

    async def turn() -> str:
        assistant = create(f"fake-model@{base_url}")
        assistant.retry = FAST
        try:
            return await assistant.respond(sandbox.request(message, **request), sandbox.tools(recorder))
        finally:
            await assistant.aclose()

    return asyncio.run(turn())


def test_search_then_answer_over_the_wire(fake, sandbox: Sandbox) -> None:
    server, base = fake
    record = sandbox.record
    params = {"patient": record.patient, "code": record.lab_code, "_sort": "-date", "_count": 50}

    def answer_from_tool_result(body: dict) -> tuple:
        result = json.loads(body["messages"][-1]["content"])  # the compacted Bundle the tool returned
        found = next(r for r in result["entry"] if r["id"] == record.lab_id)
        value = (found.get("valueQuantity") or {}).get("value", found.get("valueString"))
        return text(server, f"The latest result is {value}.")

    server.reset(
        tool_call(server, "fhir_search", {"resourceType": "Observation", "params": params}),
        answer_from_tool_result,
    )
    recorder = Recorder()
    history = (HistoryItem("doctor", "Who is this?", 0), HistoryItem("assistant", "Patient X, 64.", 0))
    said = respond(base, sandbox, recorder, "What's the latest lab?", history=history, turn=1)
    assert said == f"The latest result is {record.lab_value}."

    first, second = server.requests
    assert first["model"] == "fake-model" and first["tool_choice"] == "auto"
    assert {t["function"]["name"] for t in first["tools"]} == TOOL_NAMES
    assert [m["role"] for m in first["messages"]] == ["system", "user", "assistant", "user"]
    assert (
        first["messages"][2]["content"] == "Patient X, 64."
        and record.patient in first["messages"][0]["content"]
    )
    assert first["messages"][-1]["content"] == "What's the latest lab?"
    call, tool_message = second["messages"][-2:]
    assert call["role"] == "assistant" and call["tool_calls"][0]["function"]["name"] == "fhir_search"
    assert tool_message == {"role": "tool", "tool_call_id": "call_1", "content": tool_message["content"]}
    assert server.headers[0]["authorization"].startswith("Bearer ")
    assert second["tools"] == first["tools"]  # the full tool set every call

    assert [name for _, name, _ in recorder.calls] == ["fhir_search", "answer"]
    assert recorder.calls[0][2] == {"resourceType": "Observation", "params": params}
    search, final = recorder.results
    assert search["error"] is None and search["output"]["resourceType"] == "Bundle"
    assert search["usage"]["prompt_tokens"] == 50 and search["usage"]["total_tokens"] == 60
    assert search["usage"]["retries"] == 0 and search["usage"]["latency_ms"] >= 0
    assert final["output"] == said and final["usage"]["completion_tokens"] == 10


def test_rate_limit_then_success_is_retried(fake, sandbox: Sandbox) -> None:
    server, base = fake
    server.reset(error(429, "slow down", **{"retry-after": "0"}), text(server, "Fine."))
    recorder = Recorder()
    assert respond(base, sandbox, recorder, "Hello?") == "Fine."
    assert len(server.requests) == 2
    assert recorder.results[0]["usage"]["retries"] == 1


def test_persistent_server_errors_are_infrastructure(fake, sandbox: Sandbox) -> None:
    server, base = fake
    server.reset(error(500, "boom"))
    with pytest.raises(InfrastructureFailure, match="HTTP 500 after 3 attempts"):
        respond(base, sandbox, Recorder(), "Hello?")
    assert len(server.requests) == FAST.attempts


def test_unreachable_endpoint_is_infrastructure(sandbox: Sandbox) -> None:
    with pytest.raises(InfrastructureFailure, match="unreachable after 3 attempts"):
        respond("http://127.0.0.1:9/v1", sandbox, Recorder(), "Hello?")


def test_configuration_errors_are_not_retried_and_not_the_models(fake, sandbox: Sandbox) -> None:
    server, base = fake
    server.reset(error(401, "bad key", code="invalid_api_key"))
    with pytest.raises(InfrastructureFailure, match="HTTP 401"):
        respond(base, sandbox, Recorder(), "Hello?")
    assert len(server.requests) == 1
    server.reset(error(400, "too long", code="context_length_exceeded"))
    with pytest.raises(AssistantFailure, match="context_length_exceeded"):
        respond(base, sandbox, Recorder(), "Hello?")


def test_garbage_tool_name_is_the_assistants_fault(fake, sandbox: Sandbox) -> None:
    server, base = fake
    server.reset(tool_call(server, "rm_rf", {"path": "/"}))
    with pytest.raises(AssistantFailure, match="unknown tool 'rm_rf'"):
        respond(base, sandbox, Recorder(), "Hello?")


def test_invalid_json_arguments_once_is_reported_twice_fails(fake, sandbox: Sandbox) -> None:
    server, base = fake
    server.reset(tool_call(server, "fhir_read", '{"resourceType": "Patient", "id": '), text(server, "Sorry."))
    assert respond(base, sandbox, Recorder(), "Hello?") == "Sorry."
    told = json.loads(server.requests[1]["messages"][-1]["content"])
    assert told["error"].startswith("arguments are not valid JSON")
    server.reset(tool_call(server, "fhir_read", "not json at all"))
    with pytest.raises(AssistantFailure, match="2 invalid tool calls"):
        respond(base, sandbox, Recorder(), "Hello?")


def test_looping_past_the_step_limit(fake, sandbox: Sandbox) -> None:
    server, base = fake
    server.reset(tool_call(server, "fhir_read", {"resourceType": "Patient", "id": sandbox.record.patient}))
    recorder = Recorder()
    with pytest.raises(StepLimitExceeded, match="more than 2 tool steps"):
        respond(base, sandbox, recorder, "Hello?", max_steps=2)
    assert len(server.requests) == 3 and len(recorder.calls) == 3  # the call past the limit is on the log
    assert len(recorder.results) == 2  # ...and was not run


@pytest.mark.parametrize("content", [None, "   "])
def test_non_text_or_empty_answers_are_the_assistants_fault(fake, sandbox: Sandbox, content) -> None:
    server, base = fake
    server.reset(text(server, content))
    with pytest.raises(AssistantFailure, match="without text"):
        respond(base, sandbox, Recorder(), "Hello?")


def test_no_choices_is_the_assistants_fault(fake, sandbox: Sandbox) -> None:
    server, base = fake
    empty = server.completion({"role": "assistant", "content": "x"}, "stop") | {"choices": []}
    server.reset((200, empty, {}))
    with pytest.raises(AssistantFailure, match="no choice"):
        respond(base, sandbox, Recorder(), "Hello?")


def test_spec_parsing_and_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ROUNDS_OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    local = create("qwen2.5:7b@http://127.0.0.1:11434/v1")
    assert isinstance(local, Assistant) and isinstance(local, OpenAIChatAssistant)
    assert local.model == "qwen2.5:7b" and local.spec == "openai:qwen2.5:7b@http://127.0.0.1:11434/v1"
    assert (
        str(local.client.base_url).startswith("http://127.0.0.1:11434/v1")
        and local.client.api_key == "unused"
    )
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        create("gpt-4o")
    monkeypatch.setenv("ROUNDS_OPENAI_API_KEY", "sk-rounds")
    assert create("gpt-4o").client.api_key == "sk-rounds"
    for bad in ["", "two words@http://x", "m@httpx"]:
        with pytest.raises(ValueError, match="expected <model>"):
            create(bad)
    assert openai_chat.RetryPolicy().delay(0, "2") == 2.0
    assert 0 < openai_chat.RetryPolicy(base_delay_s=1).delay(3, None) <= 8.0


def test_the_prompt_names_the_patient_clock_and_language(sandbox: Sandbox) -> None:
    zh = openai_chat.opening_messages(
        sandbox.request("肌酐多少？", language="zh", now="2150-01-02T08:00:00Z")
    )
    assert "Chinese" in zh[0]["content"] and "2150-01-02T08:00:00Z" in zh[0]["content"]
    assert f"Patient/{sandbox.record.patient}" in zh[0]["content"] and zh[-1] == {
        "role": "user",
        "content": "肌酐多少？",
    }
    en = openai_chat.system_prompt(sandbox.request("x"))
    assert "Reply in English." in en and "{" not in en
