"""`openai:` end to end: the real `openai` SDK against an OpenAI-compatible server this test starts, tool
calls running against a sandbox loaded with a synthetic patient."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import pytest

from services.simulator.assistant_protocol import (
    TOOL_NAMES,
    Assistant,
    AssistantFailure,
    HistoryItem,
    InfrastructureFailure,
    StepLimitExceeded,
)
from services.simulator.assistants import openai_chat
from services.simulator.assistants.openai_chat import OpenAIChatAssistant, RetryPolicy, create
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
    server.reset(error(400, "Requested tokens (4242) exceed context window of 2048"))  # llama-cpp-python
    with pytest.raises(AssistantFailure, match="exceed context window"):
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
    # ...and the model call that asked for it is still accounted, once, with its tokens
    assert [c["outcome"] for c in recorder.model_calls] == ["step_limit"] and recorder.accounted() == 3
    assert recorder.model_calls[0]["usage"]["prompt_tokens"] > 0


@pytest.mark.parametrize("content", [None, "   "])
def test_non_text_or_empty_answers_are_the_assistants_fault(fake, sandbox: Sandbox, content) -> None:
    server, base = fake
    server.reset(text(server, content))
    recorder = Recorder()
    with pytest.raises(AssistantFailure, match="without text"):
        respond(base, sandbox, recorder, "Hello?")
    failed = [(c["outcome"], c["error"][:26]) for c in recorder.model_calls]
    assert failed == [("failed", "the model answered without")]


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
    assert create("gpt-4o", "sk-rounds").client.api_key == "sk-rounds"  # ROUNDS_OPENAI_API_KEY, as handed
    monkeypatch.setenv("OPENAI_API_KEY", "sk-library")
    assert create("gpt-4o").client.api_key == "sk-library"
    assert create("gpt-4o", "sk-rounds").client.api_key == "sk-rounds"  # the configured key first
    monkeypatch.delenv("OPENAI_API_KEY")
    for bad in ["", "two words@http://x", "m@httpx"]:
        with pytest.raises(ValueError, match="expected <model>"):
            create(bad)
    assert openai_chat.RetryPolicy().delay(0, "2") == 2.0
    assert 0 < openai_chat.RetryPolicy(base_delay_s=1).delay(3, None) <= 8.0


def test_a_base_url_from_the_environment_is_the_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """OPENAI_BASE_URL without `@<base_url>`: the endpoint, key placeholder and profile as if given inline."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ROUNDS_OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")
    local = create("qwen2.5:7b")
    assert str(local.client.base_url).startswith("http://127.0.0.1:11434/v1")
    assert local.client.api_key == "unused" and local.profile == "local"
    assert local.endpoint.url == "http://127.0.0.1:11434/v1"


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


# -- wire compatibility: what real servers enforce ----------------------------------------------------------


def post(base_url: str, body: dict) -> tuple[int, dict]:
    import httpx

    response = httpx.post(f"{base_url}/chat/completions", json=body, timeout=10)
    return response.status_code, response.json()


def test_the_strict_server_refuses_what_real_servers_refuse(fake) -> None:
    server, base = fake
    server.reset(text(server, "never sent"))
    call = {"id": "call_9", "type": "function", "function": {"name": "fhir_read", "arguments": "{}"}}
    user = {"role": "user", "content": "hi"}
    cases = [
        ([user, {"role": "assistant", "tool_calls": [call]}, {"role": "tool", "tool_call_id": "call_9",
                                                              "content": "{}"}], {}, 500, "content"),
        ([user, {"role": "assistant", "content": None, "tool_calls": [call]},
          {"role": "tool", "tool_call_id": "call_9", "content": "{}"}], {}, 500, "content"),
        ([user, {"role": "assistant", "content": "", "tool_calls": [call]},
          {"role": "tool", "content": "{}"}], {}, 400, "tool_call_id"),
        ([user, {"role": "assistant", "content": "", "tool_calls": [call]}, user], {}, 400, "tool_call_id"),
        ([user], {"max_tokens": 0}, 400, "max_tokens"),
        ([user], {"model": "no-such-model"}, 404, "does not exist"),
        ([{"role": "robot", "content": "x"}], {}, 400, "role"),
    ]
    for messages, extra, status, said in cases:
        got, body = post(base, {"model": "fake-model", "messages": messages} | extra)
        assert got == status and said in body["error"]["message"], (messages, extra, got, body)
        assert set(body["error"]) == {"message", "type", "param", "code"}
    good = [user, {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_9", "content": "{}"}]
    assert post(base, {"model": "fake-model", "messages": good})[0] == 200


def test_tool_calls_go_back_with_content_and_every_call_has_max_tokens(fake, sandbox: Sandbox) -> None:
    """The adapter's messages pass the strict server (the model's tool-calling message had `content:
    null`)."""
    server, base = fake
    read = tool_call(server, "fhir_read", {"resourceType": "Patient", "id": sandbox.record.patient})
    server.reset(read, text(server, "Done."))
    assert respond(base, sandbox, Recorder(), "Who?") == "Done."
    assert server.refused == [] and len(server.requests) == 2
    sent = server.requests[1]["messages"][-2]
    assert sent["role"] == "assistant" and sent["content"] == "" and sent["tool_calls"][0]["id"] == "call_1"
    assert [r["max_tokens"] for r in server.requests] == [512, 512]  # the local profile's default


def configured(base_url: str, **limits) -> OpenAIChatAssistant:
    assistant = create(f"fake-model@{base_url}")
    assistant.retry = FAST
    assistant.configure(**limits)
    return assistant


def limited_turn(base_url: str, sandbox: Sandbox, recorder: Recorder | None = None, **limits) -> str:
    async def turn() -> str:
        assistant = configured(base_url, **limits)
        try:
            return await assistant.respond(sandbox.request("Hi"), sandbox.tools(recorder or Recorder()))
        finally:
            await assistant.aclose()

    return asyncio.run(turn())


def test_max_tokens_is_honoured_and_a_cut_answer_is_still_the_models(fake, sandbox: Sandbox) -> None:
    server, base = fake
    server.reset(text(server, "one two three four five six"))
    assert limited_turn(base, sandbox, max_tokens=3) == "one two three"
    assert server.requests[0]["max_tokens"] == 3


def wait_for_disconnect(server: FakeOpenAI, seconds: float = 5.0) -> int:
    import time

    deadline = time.monotonic() + seconds
    while server.disconnects == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    return server.disconnects


def test_a_hanging_model_times_out_as_the_models_fault_and_the_request_is_closed(fake, sandbox) -> None:
    from tests.simulator.adapters.fake_openai import HANG

    server, base = fake
    server.reset(HANG)
    from services.simulator.assistant_protocol import AssistantTimeout

    recorder = Recorder()
    with pytest.raises(AssistantTimeout, match="model timeout of 0.3 s"):
        limited_turn(base, sandbox, model_timeout_s=0.3, recorder=recorder)
    assert len(server.requests) == 1  # not retried: it would queue behind the abandoned generation
    cut = recorder.model_calls
    assert [c["outcome"] for c in cut] == ["timeout"] and cut[0]["usage"]["latency_ms"] >= 300  # time spent
    assert wait_for_disconnect(server) == 1


def test_an_abandoned_reply_stops_a_server_that_stops_when_its_client_goes_away(fake, sandbox) -> None:
    """The model timeout closes the stream mid-generation: a server that notices (as llama-cpp-python does
    while streaming) stops at once instead of finishing a reply nobody reads, so the next session does not
    queue behind it on a one-slot server."""
    from services.simulator.assistant_protocol import AssistantTimeout
    from tests.simulator.adapters.fake_openai import Generate

    server, base = fake
    server.reset(Generate(tokens=400, every_s=0.02))  # 8 s of generation
    recorder = Recorder()
    with pytest.raises(AssistantTimeout, match="model timeout of 0.5 s"):
        limited_turn(base, sandbox, model_timeout_s=0.5, recorder=recorder)
    assert server.requests[0]["stream"] is True
    assert wait_for_disconnect(server) == 1
    deadline = time.monotonic() + 2
    while server.generating and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not server.generating
    made = server.generated
    time.sleep(0.3)
    assert server.generated == made < 100  # it stopped near the deadline, not after 400 tokens


def test_a_server_that_cannot_stream_tool_calls_gets_whole_calls_for_the_run(sandbox, capfd) -> None:
    """llama-cpp-python's chatml-function-calling answers a streamed tool-calling request with an empty
    stream: the call is sent again whole (not charged to anyone), every later call of the run is whole, and
    the run says once why a timeout no longer stops the server."""
    server = FakeOpenAI(streams_tools=False)
    served = Served(server.app)
    try:
        read = tool_call(server, "fhir_read", {"resourceType": "Patient", "id": sandbox.record.patient})
        server.reset(read, text(server, "Done."))
        recorder = Recorder()

        async def two_turns() -> list[str]:
            assistant = configured(f"{served.root}/v1")
            try:
                return [await assistant.respond(sandbox.request(m), sandbox.tools(recorder))
                        for m in ("Who?", "And now?")]
            finally:
                await assistant.aclose()

        assert asyncio.run(two_turns()) == ["Done.", "Done."]
    finally:
        served.stop()
    assert [bool(r.get("stream")) for r in server.requests] == [True, False, False, False]
    assert [name for _, name, _ in recorder.calls] == ["fhir_read", "answer", "answer"]
    assert all(c["outcome"] != "failed" for c in recorder.model_calls)
    note = capfd.readouterr().err
    assert note.count("answered a streamed tool-calling completion with nothing") == 1
    assert "--max-tokens" in note


def test_a_cancelled_turn_closes_the_model_request(fake, sandbox: Sandbox) -> None:
    from tests.simulator.adapters.fake_openai import HANG

    server, base = fake
    server.reset(HANG)

    recorder = Recorder()

    async def turn() -> None:
        assistant = configured(base, model_timeout_s=60)
        try:
            await asyncio.wait_for(assistant.respond(sandbox.request("Hi"), sandbox.tools(recorder)), 0.3)
        finally:
            await assistant.aclose()

    with pytest.raises(TimeoutError):
        asyncio.run(turn())
    assert wait_for_disconnect(server) == 1
    assert [(c["outcome"], c["error"]) for c in recorder.model_calls] == [("cancelled", None)]
    assert recorder.model_calls[0]["usage"]["latency_ms"] >= 300


def test_mistyped_specs_are_refused_not_taken_for_model_names() -> None:
    from services.simulator.assistants.endpoint import parse_spec

    with pytest.raises(ValueError, match=r"needs http:// or https://.*did you mean http://127.0.0.1:8767/v1"):
        create("m@127.0.0.1:8767/v1")
    with pytest.raises(ValueError, match="model name is empty"):
        create("@")
    with pytest.raises(ValueError, match="model name is empty"):
        create("@http://127.0.0.1:8767/v1")
    assert parse_spec("qwen2.5:7b@http://127.0.0.1:11434/v1/").base_url == "http://127.0.0.1:11434/v1"
    assert parse_spec("m@http://127.0.0.1:1/v1").profile == "local"
    assert parse_spec("m@http://10.1.2.3/v1").profile == "local"
    assert parse_spec("m@http://gpu-box.local:8000/v1").profile == "local"
    assert parse_spec("gpt-4o@https://api.openai.com/v1").profile == "hosted"


# -- pre-flight ---------------------------------------------------------------------------------------------


def preflight(spec: str, any_model_name: bool = False) -> str:
    async def check() -> str:
        assistant = create(spec)
        assistant.configure(any_model_name=any_model_name)
        try:
            return await assistant.preflight()
        finally:
            await assistant.aclose()

    return asyncio.run(check())


def test_preflight_accepts_a_listed_model_and_names_url_and_model_otherwise(fake) -> None:
    from services.simulator.assistant_protocol import EndpointUnavailable

    server, base = fake
    server.reset(text(server, "pong"))
    assert preflight(f"fake-model@{base}") == f"{base} serves fake-model"
    assert server.requests == []  # the list was enough
    refused = rf"{base} \(model 'other'\) does not list 'other'; it lists fake-model.*--any-model-name"
    with pytest.raises(EndpointUnavailable, match=refused):
        preflight(f"other@{base}")
    assert server.requests == []  # refused on the list alone
    with pytest.raises(EndpointUnavailable, match=r"cannot reach the model endpoint http://127.0.0.1:9/v1 "
                                                  r"\(model 'm'\)"):
        preflight("m@http://127.0.0.1:9/v1")


def test_a_server_that_answers_for_any_name_does_not_run_an_unlisted_model() -> None:
    """llama-cpp-python answers every model name with the model it loaded: the list decides, unless the user
    says the server routes names itself."""
    from services.simulator.assistant_protocol import EndpointUnavailable

    lenient = FakeOpenAI(models=("smollm2-135m",), any_model=True)
    lenient.reset(text(lenient, "pong"))
    served = Served(lenient.app)
    try:
        base = f"{served.root}/v1"
        with pytest.raises(EndpointUnavailable, match=r"does not list 'smollm2-13m'; it lists smollm2-135m"):
            preflight(f"smollm2-13m@{base}")
        assert lenient.requests == []
        assert preflight(f"router-name@{base}", any_model_name=True).endswith("answered for router-name "
                                                                             "(it lists smollm2-135m)")
    finally:
        served.stop()


def test_a_base_url_without_v1_is_named_with_its_v1_form() -> None:
    from services.simulator.assistant_protocol import EndpointUnavailable

    server = FakeOpenAI()
    served = Served(server.app)
    try:
        with pytest.raises(EndpointUnavailable, match=rf"answers 404 at {served.root}/models; "
                                                      rf"{served.root}/v1 serves the OpenAI API: use "
                                                      rf"openai:fake-model@{served.root}/v1"):
            preflight(f"fake-model@{served.root}")
    finally:
        served.stop()


def test_preflight_refused_key_and_a_server_without_a_model_list() -> None:
    from fastapi import FastAPI

    from services.simulator.assistant_protocol import EndpointUnavailable

    keyed = FakeOpenAI(api_key="sk-right")
    served = Served(keyed.app)
    try:
        with pytest.raises(EndpointUnavailable, match=r"refused the key \(HTTP 401"):
            preflight(f"fake-model@{served.root}/v1")
    finally:
        served.stop()
    bare = FakeOpenAI()
    bare.reset(text(bare, "pong"))
    app = FastAPI()
    app.post("/v1/chat/completions")(bare._complete)  # a server without GET /v1/models
    served = Served(app)
    try:
        assert preflight(f"fake-model@{served.root}/v1").endswith("answered for fake-model")
        assert bare.requests[0]["max_tokens"] == 1
    finally:
        served.stop()


def test_preflight_against_a_server_that_never_answers() -> None:
    import socket

    from services.simulator.assistant_protocol import EndpointUnavailable
    from services.simulator.assistants import endpoint

    with socket.socket() as silent:  # accepts connections (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]

        async def check() -> None:
            assistant = create(f"m@http://127.0.0.1:{port}/v1")
            assistant.model_timeout_s = 0.3
            try:
                await endpoint.preflight(assistant.client.with_options(timeout=0.3), assistant.endpoint, 0.3)
            finally:
                await assistant.aclose()

        unreachable = rf"cannot reach the model endpoint http://127.0.0.1:{port}"
        with pytest.raises(EndpointUnavailable, match=unreachable):
            asyncio.run(check())
