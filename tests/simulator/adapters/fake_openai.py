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
answer from what the tool returned), or `HANG` (answer nothing until the client goes away; `disconnects`
counts the requests whose client closed them). `GET /v1/models` lists `models`. Every request body is kept
for the test to inspect. No real model is ever contacted.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

Step = tuple[int, Any, dict[str, str]]
HANG = "hang"  # a step: keep the request open until the client closes it


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
    def __init__(self, models: tuple[str, ...] = ("fake-model",), api_key: str | None = None) -> None:
        self.models, self.api_key = set(models), api_key
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
        self.disconnects = 0

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
        if body.get("model") not in self.models:
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
        if not self.script:
            return JSONResponse({"error": {"message": "script exhausted", "type": "test"}}, status_code=500)
        step = self.script[0] if len(self.script) == 1 else self.script.pop(0)  # the last step repeats
        if step == HANG:
            while not await request.is_disconnected():
                await asyncio.sleep(0.02)
            self.disconnects += 1
            return JSONResponse({}, status_code=499)
        status, payload, headers = step(body) if callable(step) else step
        return JSONResponse(_limit(payload, body.get("max_tokens")), status_code=status, headers=headers)

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
