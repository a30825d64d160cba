"""An OpenAI-compatible chat-completions server for tests: the exact wire format, answers scripted per test.

Each scripted step is `(status, body, headers)` or a function of the request body returning one (so a step can
answer from what the tool returned). Every request body is kept for the test to inspect. No real model is
ever contacted.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

Step = tuple[int, Any, dict[str, str]]


class FakeOpenAI:
    def __init__(self) -> None:
        self.script: list[Step | Callable[[dict], Step]] = []
        self.requests: list[dict] = []
        self.headers: list[dict[str, str]] = []
        self._ids = itertools.count(1)
        self.app = FastAPI()
        self.app.post("/v1/chat/completions")(self._complete)

    def reset(self, *steps: Step | Callable[[dict], Step]) -> None:
        self.script, self.requests, self.headers = list(steps), [], []

    async def _complete(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        if not self.script:
            return JSONResponse({"error": {"message": "script exhausted", "type": "test"}}, status_code=500)
        step = self.script[0] if len(self.script) == 1 else self.script.pop(0)  # the last step repeats
        status, payload, headers = step(body) if callable(step) else step
        return JSONResponse(payload, status_code=status, headers=headers)

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
