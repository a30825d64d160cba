"""`python:<module>:<callable>` — an assistant written as one Python function, run in-process.

The callable receives one `AssistantContext` and returns the answer text. A plain function runs in a worker
thread and gets a synchronous `httpx.Client` and `ask_patient`; an `async def` gets an `httpx.AsyncClient` and
an awaitable `ask_patient`. Both clients have the session's FHIR base as base URL and go through the session
transport (confined to the sandbox, each request a step, recorded by the FHIR server).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from services.simulator.assistant_protocol import HistoryItem, SessionTools, TurnRequest
from services.simulator.orchestrator.transport import SyncBridge


@dataclass
class AssistantContext:
    message: str  # the physician's words this turn
    language: str
    history: tuple[HistoryItem, ...]  # earlier doctor messages and this assistant's own answers
    fhir_base: str
    http: Any  # httpx.Client (sync callables) or httpx.AsyncClient (async ones), base URL = fhir_base
    ask_patient: Callable[[str], Any]  # -> str (sync) or awaitable str (async)
    ask_physician: Callable[[str], Any] | None
    session: str
    turn: int
    patient: str  # "Patient/<id>"
    now: str  # the session clock
    patient_url: str


def load_callable(target: str) -> Callable:
    module_name, _, name = target.rpartition(":")
    if not module_name or not name:
        raise ValueError(f"python: assistant needs <module>:<callable>, got {target!r}")
    fn = getattr(importlib.import_module(module_name), name)
    if not callable(fn):
        raise ValueError(f"{target} is not callable")
    return fn


class PythonAssistant:
    spec = "python"

    def __init__(self, fn: Callable) -> None:
        self.fn = fn
        self.is_async = inspect.iscoroutinefunction(fn) or (
            not inspect.isfunction(fn) and inspect.iscoroutinefunction(type(fn).__call__)
        )

    def _context(
        self,
        request: TurnRequest,
        tools: SessionTools,
        http: Any,
        ask_patient: Callable,
        ask_physician: Callable | None,
    ) -> AssistantContext:
        return AssistantContext(
            request.message,
            request.language,
            request.history,
            request.fhir_base,
            http,
            ask_patient,
            ask_physician,
            request.session_id,
            request.turn,
            request.patient,
            request.now,
            request.patient_url,
        )

    async def respond(self, request: TurnRequest, tools: SessionTools) -> Any:
        if self.is_async:
            return await self.fn(
                self._context(request, tools, tools.http, tools.ask_patient, tools.ask_physician)
            )
        loop = asyncio.get_running_loop()

        def blocking(coro_fn: Callable | None) -> Callable | None:
            if coro_fn is None:
                return None
            return lambda text: asyncio.run_coroutine_threadsafe(coro_fn(text), loop).result()

        def run() -> Any:
            with httpx.Client(
                transport=SyncBridge(tools.http, loop),
                base_url=request.fhir_base,
                headers={"Accept": "application/fhir+json"},
            ) as http:
                return self.fn(
                    self._context(
                        request, tools, http, blocking(tools.ask_patient), blocking(tools.ask_physician)
                    )
                )

        return await asyncio.to_thread(run)

    async def aclose(self) -> None:
        return None


def create(arg: str) -> PythonAssistant:
    return PythonAssistant(load_callable(arg))
