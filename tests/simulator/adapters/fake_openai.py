"""An OpenAI-compatible chat-completions server for tests: the exact wire format, strict as real servers are,
answers scripted per test.

Strict means it refuses what OpenAI or llama-cpp-python refuse, with their status codes and error bodies
(`{"error": {"message", "type", "param", "code"}}`), before any scripted step runs:

- an unknown model → 404 `model_not_found`; a wrong key (when `api_key` is set) → 401 `invalid_api_key`;
- a message without a known role, a user/system/tool message whose `content` is not a string → 400;
- an assistant message with `tool_calls` and no string `content` (missing or null) → 500, as
  llama-cpp-python's chat template fails (`'dict object' has no attribute 'content'`);
- a `role: tool` message without the `tool_call_id` of a call the assistant made, or an assistant tool call
  not answered by a tool message before the next message → 400;
- `max_tokens` not a positive integer → 400; when given, a scripted answer longer than it (in words, this
  server's tokens) is cut to it with `finish_reason: "length"`, as a real server stops generating.

Each scripted step is `(status, body, headers)`, a function of the request body returning one (so a step can
answer from what the tool returned), `HANG` (answer nothing until the client goes away; `disconnects`
counts the requests whose client closed them) or `Generate` (stream tokens slowly, stopping when the client
goes away, as llama-cpp-python does when streaming: `generated` counts the tokens it made). A request with
`"stream": true` gets its completion as server-sent chunks (`chat.completion.chunk`, the usage in a last
chunk when `stream_options.include_usage`), as OpenAI and llama-cpp-python send them. `GET /v1/models` lists
`models`. Modes of servers met in the wild: `any_model=True` answers for any model name (llama-cpp-python);
`drops_tools=True` ignores the tools and answers in plain text (a chat format without function calling);
`streams_tools=False` answers a streamed request that carries tools with an empty event stream, as
llama-cpp-python's chatml-function-calling format does (it cannot stream an automatic tool choice).
Every request body is kept for the test to inspect. No real model is ever contacted.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

Step = tuple[int, Any, dict[str, str]]
HANG = "hang"  # a step: keep the request open until the client closes it


@dataclass(frozen=True)
class Generate:
    """A step: stream `tokens` words of text, one every `every_s` seconds, until done or the client leaves."""

    tokens: int
    every_s: float


class WireError(Exception):
    def __init__(self, status: int, message: str, kind: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.body = status, {"error": {"message": message, "type": kind, "param": param,
                                                    "code": code}}


def check_messages(messages: Any) -> None:
    """What real servers refuse in `messages` (raises WireError)."""
    if not isinstance(messages, list) or not messages:
        raise WireError(400, "'messages' must be a non-empty array", param="messages")
    open_calls: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        where = f"messages.[{i}]"
        if role not in ("system", "user", "assistant", "tool"):
            raise WireError(400, f"{where}.role: unknown role {role!r}", param=f"{where}.role")
        if role != "tool" and open_calls:
            raise WireError(400, "An assistant message with 'tool_calls' must be followed by tool messages "
                            f"responding to each 'tool_call_id'. Missing: {sorted(open_calls)}",
                            param=f"{where}.role")
        content = message.get("content")
        if role == "assistant" and message.get("tool_calls"):
            if not isinstance(content, str):
                raise WireError(500, "'dict object' has no attribute 'content'", "internal_server_error")
            for call in message["tool_calls"]:
                if not (isinstance(call, dict) and call.get("id") and call.get("type") == "function"
                        and isinstance((call.get("function") or {}).get("arguments"), str)):
                    raise WireError(400, f"{where}.tool_calls: malformed call {call!r}", param=where)
                open_calls.add(call["id"])
            continue
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in open_calls:
                raise WireError(400, f"{where}: 'tool_call_id' {call_id!r} answers no tool call of the "
                                "preceding assistant message", param=f"{where}.tool_call_id")
            open_calls.discard(call_id)
        if not isinstance(content, str):
            raise WireError(400, f"{where}.content: expected a string, got {type(content).__name__}",
                            param=f"{where}.content")
    if open_calls:
        raise WireError(400, f"tool calls {sorted(open_calls)} were never answered", param="messages")


def _limit(payload: Any, max_tokens: int | None) -> Any:
    """The completion as a server stopping at `max_tokens` would send it (text cut, finish `length`)."""
    if max_tokens is None or not isinstance(payload, dict) or not payload.get("choices"):
        return payload
    choice = payload["choices"][0]
    words = (choice.get("message") or {}).get("content")
    if not isinstance(words, str) or len(words.split()) <= max_tokens:
        return payload
    cut = {**choice, "message": {**choice["message"], "content": " ".join(words.split()[:max_tokens])},
           "finish_reason": "length"}
    usage = {**(payload.get("usage") or {}), "completion_tokens": max_tokens}
    return {**payload, "choices": [cut], "usage": usage}


class FakeOpenAI:
    def __init__(self, models: tuple[str, ...] = ("fake-model",), api_key: str | None = None, *,
                 any_model: bool = False, drops_tools: bool = False, streams_tools: bool = True) -> None:
        self.models, self.api_key = set(models), api_key
        self.any_model, self.drops_tools, self.streams_tools = any_model, drops_tools, streams_tools
        self.generated = 0  # tokens the Generate steps streamed
        self.generating = False  # a Generate step is still producing tokens
        self.script: list[Step | Callable[[dict], Step] | str] = []
        self.requests: list[dict] = []
        self.headers: list[dict[str, str]] = []
        self.refused: list[dict] = []  # the bodies of what the server refused (status, error)
        self.disconnects = 0
        self.model_lists = 0
        self._ids = itertools.count(1)
        self.app = FastAPI()
        self.app.post("/v1/chat/completions")(self._complete)
        self.app.get("/v1/models")(self._models)

    def reset(self, *steps: Step | Callable[[dict], Step] | str) -> None:
        self.script, self.requests, self.headers, self.refused = list(steps), [], [], []
        self.disconnects, self.generated = 0, 0

    def _authorize(self, request: Request) -> None:
        if self.api_key is not None and request.headers.get("authorization") != f"Bearer {self.api_key}":
            raise WireError(401, "Incorrect API key provided.", code="invalid_api_key")

    async def _models(self, request: Request) -> JSONResponse:
        self.model_lists += 1
        try:
            self._authorize(request)
        except WireError as exc:
            return JSONResponse(exc.body, status_code=exc.status)
        data = [{"id": m, "object": "model", "created": 1_790_000_000, "owned_by": "test"}
                for m in sorted(self.models)]
        return JSONResponse({"object": "list", "data": data})

    def _check(self, request: Request, body: Any) -> None:
        self._authorize(request)
        if not isinstance(body, dict):
            raise WireError(400, "the body must be a JSON object")
        if body.get("model") not in self.models and not self.any_model:
            raise WireError(404, f"The model `{body.get('model')}` does not exist or you do not have access "
                            "to it.", code="model_not_found")
        check_messages(body.get("messages"))
        max_tokens = body.get("max_tokens")
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise WireError(400, f"max_tokens must be a positive integer, got {max_tokens!r}",
                            param="max_tokens")

    async def _complete(self, request: Request) -> JSONResponse:
        try:
            body = json.loads(await request.body())
        except ValueError:
            return JSONResponse(WireError(400, "the body is not JSON").body, status_code=400)
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        try:
            self._check(request, body)
        except WireError as exc:
            self.refused.append({"status": exc.status, **exc.body})
            return JSONResponse(exc.body, status_code=exc.status)
        if self.drops_tools:
            return self._answer(body, 200, self.completion(
                {"role": "assistant", "content": "I do not have access to the record.", "refusal": None},
                "stop"), {})
        if body.get("stream") and body.get("tools") and not self.streams_tools:
            return StreamingResponse(_nothing(), media_type="text/event-stream")
        if not self.script:
            return JSONResponse({"error": {"message": "script exhausted", "type": "test"}}, status_code=500)
        step = self.script[0] if len(self.script) == 1 else self.script.pop(0)  # the last step repeats
        if step == HANG:
            while not await request.is_disconnected():
                await asyncio.sleep(0.02)
            self.disconnects += 1
            return JSONResponse({}, status_code=499)
        if isinstance(step, Generate):
            return StreamingResponse(self._generate(step), media_type="text/event-stream")
        status, payload, headers = step(body) if callable(step) else step
        return self._answer(body, status, _limit(payload, body.get("max_tokens")), headers)

    def _answer(self, body: dict, status: int, payload: Any, headers: dict[str, str]) -> Any:
        if status != 200 or not body.get("stream"):
            return JSONResponse(payload, status_code=status, headers=headers)
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return StreamingResponse(_sse(chunks(payload, usage)), media_type="text/event-stream",
                                 headers=headers)

    async def _generate(self, step: Generate):
        """Tokens until done; Starlette cancels this when the client disconnects: the generation ends."""
        self.generating = True
        try:
            for i in range(step.tokens):
                await asyncio.sleep(step.every_s)
                self.generated += 1
                delta = {**({"role": "assistant"} if i == 0 else {}), "content": f"w{i} "}
                yield _event({"id": "chatcmpl-gen", "object": "chat.completion.chunk",
                              "created": 1_790_000_000, "model": "fake-model",
                              "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
            yield "data: [DONE]\n\n"
        except asyncio.CancelledError:
            self.disconnects += 1
            raise
        finally:
            self.generating = False

    def completion(self, message: dict, finish: str, usage: tuple[int, int] = (50, 10)) -> dict:
        return {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": 1_790_000_000,
            "model": "fake-model",
            "system_fingerprint": "fp_test",
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
        }


async def _nothing():
    """An event stream that ends at once, without a chunk."""
    yield "data: [DONE]\n\n"


def tool_call(fake: FakeOpenAI, name: str, arguments: dict | str, call_id: str = "call_1") -> Step:
    """A completion whose message calls one tool (arguments sent as the JSON text, or raw garbage)."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    message = {
        "role": "assistant",
        "content": None,
        "refusal": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}],
    }
    return 200, fake.completion(message, "tool_calls"), {}


def text(fake: FakeOpenAI, content: str | None) -> Step:
    message = {"role": "assistant", "content": content, "refusal": None}
    return 200, fake.completion(message, "stop"), {}


def error(status: int, message: str, code: str | None = None, **headers: str) -> Step:
    kind = (
        "rate_limit_exceeded"
        if status == 429
        else "server_error"
        if status >= 500
        else "invalid_request_error"
    )
    return status, {"error": {"message": message, "type": kind, "param": None, "code": code}}, headers


def chunks(completion: dict, usage: bool) -> list[dict]:
    """A completion as the chunks a streaming server sends: the role, the content, each tool call (its id and
    name, then its arguments), the finish reason; the usage alone in a last chunk when asked."""
    base = {k: completion[k] for k in ("id", "created", "model")}
    if not completion.get("choices"):
        return [{**base, "object": "chat.completion.chunk", "choices": []}]
    choice = completion["choices"][0]
    message, base = choice.get("message") or {}, {k: completion[k] for k in ("id", "created", "model")}

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {**base, "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": "" if message.get("tool_calls") else None})]
    if message.get("content"):
        out.append(chunk({"content": message["content"]}))
    for i, call in enumerate(message.get("tool_calls") or []):
        out.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                          "function": {"name": call["function"]["name"], "arguments": ""}}]}))
        arguments = call["function"]["arguments"]
        out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": arguments}}]}))
    out.append(chunk({}, choice.get("finish_reason")))
    if usage and completion.get("usage"):
        out.append({**base, "object": "chat.completion.chunk", "choices": [], "usage": completion["usage"]})
    return out


def _event(data: dict) -> str:
    return f"data: {json.dumps(data)}\n\n"


async def _sse(items: list[dict]):
    for item in items:
        yield _event(item)
    yield "data: [DONE]\n\n"
