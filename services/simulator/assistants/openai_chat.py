"""`openai:<model>[@<base_url>]`: an assistant behind any OpenAI-compatible chat-completions endpoint.

PhysAssistBench's loop with Rounds' tools: the full tool set every turn (data/fhir_tools.json), the
physician's earlier messages and the model's own earlier answers in the history, at most
`TurnRequest.max_steps` tool steps (one more → `StepLimitExceeded`); the turn ends when the model calls
`answer` or replies with plain text. Every tool call is recorded through `SessionTools.step/result`
(`rounds.tool.call|result`); the model call that produced it rides on its first result as `usage` (tokens,
latency, retries).

Wire format as real servers demand it: an assistant message that carries `tool_calls` also carries `content`
(`""` when the model said nothing: llama-cpp-python's template fails on a missing or null one), each tool
result is a `role: tool` message with its `tool_call_id`, and `max_tokens` goes with every call so a server
stops generating a reply nobody will read.

Failures: 429/5xx/refused connections of the model endpoint are retried with exponential backoff
(Retry-After honoured) and become `InfrastructureFailure` when the attempts run out; other 4xx are Rounds'
configuration (key, model name) → infrastructure too, except a prompt the model's context cannot hold (its
own limit, by code or by the words local servers use) → `AssistantFailure`; no choice, no text, an empty
answer → `AssistantFailure`. A model call that takes longer than the model timeout is the model's slowness →
`AssistantTimeout`, not retried (a retry would queue behind the abandoned generation on a one-slot server);
the completion is streamed and the stream closed at the deadline (or when the turn is cancelled), so a server
that stops generating when its client goes away (llama-cpp-python, vLLM and Ollama do when streaming) frees
its slot at once instead of finishing a reply nobody will read. The chunks are accumulated by the SDK's own
`ChatCompletionStreamState` into the completion a non-streamed call would have returned.

The API key comes from `ROUNDS_OPENAI_API_KEY` or `OPENAI_API_KEY`; a local server given by `@<base_url>` may
need none (a placeholder is sent). The SDK's own retries are off so each attempt is ours to count.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import openai
from openai import AsyncOpenAI
from openai.lib.streaming.chat import ChatCompletionStreamState

from services.simulator.assistant_protocol import (
    AssistantFailure,
    AssistantTimeout,
    InfrastructureFailure,
    SessionFailure,
    SessionTools,
    StepLimitExceeded,
    TurnRequest,
)
from services.simulator.assistants.endpoint import Endpoint, parse_spec, preflight, profiles
from services.simulator.assistants.fhir_tools import ToolExecutor, call_recorded, parse_arguments, toolset


@cache
def settings() -> dict[str, Any]:
    """Prompt, retry policy and limits (data/openai_chat.json)."""
    return json.loads(resources.files(__package__).joinpath("data/openai_chat.json").read_text())


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    retry_statuses: frozenset[int] = frozenset({408, 409, 429})

    @classmethod
    def from_settings(cls) -> RetryPolicy:
        raw = settings()["retry"]
        return cls(raw["attempts"], raw["base_delay_s"], raw["max_delay_s"], frozenset(raw["retry_statuses"]))

    def delay(self, attempt: int, retry_after: str | None) -> float:
        """Seconds before the next attempt: the server's Retry-After if sane, else backoff with jitter."""
        try:
            asked = float(retry_after) if retry_after is not None else None
        except ValueError:
            asked = None
        if asked is not None and 0 <= asked <= self.max_delay_s:
            return asked
        return min(self.base_delay_s * 2**attempt, self.max_delay_s) * (1 - 0.25 * random.random())


def openai_tools() -> list[dict[str, Any]]:
    """The tool set in chat-completions form."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in toolset().tools
    ]


def system_prompt(request: TurnRequest) -> str:
    conf = settings()
    names = conf["language_names"]
    return " ".join(conf["system"]).format(
        patient=request.patient, now=request.now, language_name=names.get(request.language, request.language)
    )


def opening_messages(request: TurnRequest) -> list[dict[str, Any]]:
    """System prompt, the conversation so far (the model's own answers included), the physician's message."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt(request)}]
    for item in request.history:
        messages.append({"role": "user" if item.role == "doctor" else "assistant", "content": item.text})
    messages.append({"role": "user", "content": request.message})
    return messages


def assistant_message(message: Any) -> dict[str, Any]:
    """The model's tool-calling message as it goes back to the model: `content` always a string."""
    calls = [{"id": c.id, "type": c.type, "function": {"name": c.function.name,
                                                         "arguments": c.function.arguments}}
             for c in message.tool_calls]
    return {"role": "assistant", "content": message.content or "", "tool_calls": calls}


class StreamRefused(Exception):
    """The server answered a streamed completion with no chunk at all: it cannot stream this call."""


class OpenAIChatAssistant:
    """One model behind one endpoint; a client shared by all the sessions of a run."""

    def __init__(self, spec: str, endpoint: Endpoint, client: AsyncOpenAI, retry: RetryPolicy | None = None
                 ) -> None:
        self.spec, self.endpoint, self.model, self.client = spec, endpoint, endpoint.model, client
        self.retry = retry or RetryPolicy.from_settings()
        defaults = profiles()[endpoint.profile]
        self.max_tokens: int = defaults["max_tokens"]
        self.model_timeout_s: float = defaults["model_timeout_s"]
        self.any_model_name = False  # the server routes any model name itself: the pre-flight trusts it
        # streamed until the server answers a streamed call with nothing (llama-cpp-python's
        # chatml-function-calling format cannot stream an automatic tool choice); then whole replies
        self.streaming = True

    @property
    def profile(self) -> str:
        """`local` or `hosted`: which run defaults fit this endpoint (data/endpoint_profiles.json)."""
        return self.endpoint.profile

    def configure(self, *, max_tokens: int | None = None, model_timeout_s: float | None = None,
                  any_model_name: bool = False) -> None:
        """The run's limits on every model call (`rounds run --max-tokens/--model-timeout`), and whether the
        pre-flight may take a model name the server does not list (`--any-model-name`)."""
        self.any_model_name = any_model_name
        if max_tokens is not None:
            self.max_tokens = max_tokens
        if model_timeout_s is not None:
            self.model_timeout_s = model_timeout_s

    def limits(self) -> dict[str, Any]:
        """What a run records about the model calls (rounds.run options)."""
        return {"maxTokens": self.max_tokens, "modelTimeoutS": self.model_timeout_s}

    async def preflight(self) -> str:
        return await preflight(self.client.with_options(timeout=self.model_timeout_s), self.endpoint,
                               any_model_name=self.any_model_name)

    async def aclose(self) -> None:
        await self.client.close()

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        messages = opening_messages(request)
        executor = ToolExecutor(tools)
        steps = 0
        while True:
            completion, usage = await self._complete(messages, tools)
            try:
                message = _message(completion)
                calls = message.tool_calls or []
                if not calls:
                    text = message.content
                    if not isinstance(text, str) or not text.strip():
                        raise AssistantFailure(
                            f"the model answered without text (finish: {_finish(completion)})")
                    spent, usage = usage, None  # call_recorded accounts for it, whatever happens
                    outcome = await call_recorded(executor, "answer", {"text": text}, spent)
                    return outcome.final or text.strip()
                messages.append(assistant_message(message))
                for call in calls:
                    if call.type != "function":
                        raise AssistantFailure(f"tool call of unsupported type {call.type!r}")
                    name = call.function.name
                    if name != "answer":
                        steps += 1
                        if steps > request.max_steps:
                            if usage is not None:
                                tools.model_call("step_limit", usage)
                                usage = None
                            # On the log first (the orchestrator's `step` raises StepLimitExceeded itself).
                            tools.step(name, parse_arguments(call.function.arguments)[0])
                            raise StepLimitExceeded(
                                f"more than {request.max_steps} tool steps in turn {request.turn}"
                            )
                    spent, usage = usage, None  # on its first result only
                    outcome = await call_recorded(executor, name, call.function.arguments, spent)
                    if outcome.final is not None:
                        return outcome.final
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": outcome.for_model()})
            except SessionFailure as exc:
                if usage is not None:  # the reply was refused before any result carried its usage
                    tools.model_call("failed", usage, str(exc)[:500])
                raise

    async def _complete(self, messages: list[dict[str, Any]],
                        tools: SessionTools) -> tuple[Any, dict[str, int]]:
        """One chat completion, retried on transient failures; its usage (tokens, latency, retries). A call
        that ends without a completion (model timeout, the turn cut, the endpoint's error) is recorded here
        with the time it took (`tools.model_call`)."""
        attempt = 0
        first = time.perf_counter()
        try:
            while True:
                started = time.perf_counter()
                try:
                    async with asyncio.timeout(self.model_timeout_s):
                        call = self._streamed if self.streaming else self._whole
                        completion = await call(messages)
                except StreamRefused:
                    self._stop_streaming()
                    continue  # the same call again, whole, with its own timeout: not the model's fault
                except (openai.APITimeoutError, TimeoutError) as exc:
                    raise AssistantTimeout(f"the model gave no reply within the model timeout of "
                                           f"{self.model_timeout_s:g} s ({self.endpoint.url})") from exc
                except openai.APIStatusError as exc:
                    if not self._retryable(exc.status_code) or attempt + 1 >= self.retry.attempts:
                        raise self._classify(exc, attempt) from exc
                    await asyncio.sleep(self.retry.delay(attempt, exc.response.headers.get("retry-after")))
                except openai.APIConnectionError as exc:
                    if attempt + 1 >= self.retry.attempts:
                        raise InfrastructureFailure(
                            f"model endpoint {self.endpoint.url} unreachable after {attempt + 1} attempts: "
                            f"{exc.__cause__ or exc}"
                        ) from exc
                    await asyncio.sleep(self.retry.delay(attempt, None))
                else:
                    latency = round((time.perf_counter() - started) * 1000)
                    return completion, _usage(completion, latency, attempt)
                attempt += 1
        except BaseException as exc:  # the call is spent whatever ended it: account for it, then let it go on
            outcome = ("timeout" if isinstance(exc, AssistantTimeout) else
                       "cancelled" if isinstance(exc, asyncio.CancelledError) else "failed")
            spent = {"latency_ms": round((time.perf_counter() - first) * 1000), "retries": attempt}
            tools.model_call(outcome, spent, None if outcome == "cancelled" else str(exc)[:500])
            raise

    async def _streamed(self, messages: list[dict[str, Any]]) -> Any:
        """One completion, streamed and accumulated; leaving early (the deadline, the turn cut) closes the
        response, which is how a client tells a server to stop generating."""
        stream = await self.client.chat.completions.create(
            model=self.model, messages=messages, tools=openai_tools(), tool_choice="auto",
            max_tokens=self.max_tokens, timeout=self.model_timeout_s, stream=True,
            stream_options={"include_usage": True},
        )
        state = ChatCompletionStreamState()
        chunks = 0
        async with stream:
            async for chunk in stream:
                state.handle_chunk(chunk)
                chunks += 1
        if not chunks:
            raise StreamRefused
        return state.current_completion_snapshot  # not get_final_completion: it refuses a reply cut at
        # max_tokens, which is still the model's (and ours to judge)

    async def _whole(self, messages: list[dict[str, Any]]) -> Any:
        """One completion in one reply, for a server that cannot stream this call: a deadline closes the
        request, but such a server may go on generating until `max_tokens`."""
        completion = await self.client.chat.completions.create(
            model=self.model, messages=messages, tools=openai_tools(), tool_choice="auto",
            max_tokens=self.max_tokens, timeout=self.model_timeout_s,
        )
        if not getattr(completion, "choices", None):
            raise InfrastructureFailure(f"model endpoint {self.endpoint.url} (model {self.model!r}) "
                                        "answered a completion with no choice, streamed or whole")
        return completion

    def _stop_streaming(self) -> None:
        """Said once per run: why model calls stop being streamed, and what that costs on a timeout."""
        if self.streaming:
            self.streaming = False
            sys.stderr.write(
                f"note: {self.endpoint.url} answered a streamed tool-calling completion with nothing "
                "(llama-cpp-python's chatml-function-calling cannot stream an automatic tool choice); model "
                "calls are sent whole from now on, so a call past --model-timeout is abandoned by Rounds but "
                "the server may keep generating until --max-tokens\n")

    def _retryable(self, status: int) -> bool:
        return status >= 500 or status in self.retry.retry_statuses

    def _classify(self, exc: openai.APIStatusError, attempt: int) -> Exception:
        code = str(getattr(exc, "code", None) or "")
        said = str(exc.message).lower()
        if code in settings()["assistant_fault_codes"] or (
                exc.status_code < 500 and any(m in said for m in settings()["assistant_fault_messages"])):
            return AssistantFailure(f"model endpoint refused the conversation: {code}: {exc.message}")
        tries = f" after {attempt + 1} attempts" if attempt else ""
        return InfrastructureFailure(
            f"model endpoint {self.endpoint.url} (model {self.model!r}) HTTP {exc.status_code}{tries}: "
            f"{exc.message}")


def _message(completion: Any) -> Any:
    choices = getattr(completion, "choices", None)
    if not choices or getattr(choices[0], "message", None) is None:
        raise AssistantFailure("the model endpoint returned no choice")
    return choices[0].message


def _finish(completion: Any) -> str | None:
    return getattr(completion.choices[0], "finish_reason", None)


def _usage(completion: Any, latency_ms: int, retries: int) -> dict[str, int]:
    usage = getattr(completion, "usage", None)
    out = {"latency_ms": latency_ms, "retries": retries}
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = getattr(usage, key, None)
        if isinstance(value, int):
            out[key] = value
    return out


def api_key(base_url: str | None, configured: str | None = None) -> str:
    """`configured` (ROUNDS_OPENAI_API_KEY, handed by the command), else OPENAI_API_KEY, the client library's
    own variable; "unused" for a local server, which checks none."""
    key = configured or os.environ.get("OPENAI_API_KEY")
    if key:
        return key
    if base_url:
        return "unused"  # a local OpenAI-compatible server that checks no key
    raise ValueError("openai: set OPENAI_API_KEY (or ROUNDS_OPENAI_API_KEY), or give a local @<base_url>")


def create(arg: str, api_key_configured: str | None = None) -> OpenAIChatAssistant:
    """`openai:<model>[@<base_url>]` → the assistant (the registry calls this with what follows `openai:`,
    and the configured key: registry.MODEL_KEYED)."""
    endpoint = parse_spec(arg)
    client = AsyncOpenAI(
        api_key=api_key(endpoint.base_url, api_key_configured),
        base_url=endpoint.base_url,
        max_retries=0,
        timeout=float(profiles()[endpoint.profile]["model_timeout_s"]),  # each call sets the run's own
    )
    return OpenAIChatAssistant(f"openai:{arg.strip()}", endpoint, client)
