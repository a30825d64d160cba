"""The per-session MCP server: `/sessions/<id>/mcp` (streamable HTTP, `mcp` SDK) beside the patient endpoint.

MCP-capable agents get the same tools as `openai:` (data/fhir_tools.json, run by the same `ToolExecutor`), so
their EHR calls go over HTTP to the session's FHIR base and are recorded like anyone's. One low-level MCP
server serves every session; the session is the one in the request path. The simulator mounts it
(`mount_mcp(app)`) on the in-process FHIR app, or on its own patient app next to a separate `rounds serve`;
services/fhir_api knows nothing of it.

While an MCP assistant's turn is in progress, the orchestrator's `SessionTools` for that turn are registered
in a `TurnRegistry` (mcp_agent.py does it around the webhook call): tool calls then count as the turn's steps,
are recorded as `rounds.tool.call|result`, reach the patient through the orchestrator, and a call that ends
the session (step limit, infrastructure, repeated garbage) is kept on the turn for the adapter to raise when
the webhook returns. They run on the event loop of the turn, whichever loop serves the MCP request. Outside a
registered turn (an agent poking around between turns) the calls still work on the in-process FHIR app: FHIR
through the app itself, the patient at `POST /sessions/<id>/patient` — unrecorded as tool events, unbounded.

The MCP endpoint bypasses the app's admission limit (a held slot would deadlock the FHIR calls it makes), is
stateless (each POST carries its own session id in the path; no GET stream), answers JSON, and starts the
SDK's session manager on the first request (no app lifespan needed; `McpMount.aclose` stops it).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import re
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from services.fhir_api.http.openapi import add_paths
from services.simulator.assistant_protocol import PatientFailure, SessionFailure, SessionTools
from services.simulator.assistants.fhir_tools import ToolExecutor, call_recorded, toolset

OPENAPI = Path(__file__).with_name("data") / "mcp_openapi.json"  # its entry in the app's OpenAPI
PATH = re.compile(r"^/sessions/(?P<session>[A-Za-z0-9\-._~]{1,128})/mcp/?$")
_SESSION: contextvars.ContextVar[str] = contextvars.ContextVar("rounds_mcp_session")


@dataclass
class ActiveTurn:
    """One registered turn: its tools (and executor, so invalid calls add up), the loop it runs on, the first
    session-ending failure raised inside a tool call and the text of an `answer` call."""

    executor: ToolExecutor
    loop: asyncio.AbstractEventLoop
    failure: SessionFailure | None = None
    answer: str | None = None

    async def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run `coro` on the turn's event loop (the MCP request may be served on another one)."""
        if asyncio.get_running_loop() is self.loop:
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))


@dataclass
class TurnRegistry:
    """Session id → the turn in progress. One per process by default (`REGISTRY`)."""

    active: dict[str, ActiveTurn] = field(default_factory=dict)

    @contextmanager
    def turn(self, session_id: str, tools: SessionTools) -> Iterator[ActiveTurn]:
        active = ActiveTurn(ToolExecutor(tools), asyncio.get_running_loop())
        self.active[session_id] = active
        try:
            yield active
        finally:
            if self.active.get(session_id) is active:
                del self.active[session_id]


REGISTRY = TurnRegistry()


def mcp_tools() -> list[types.Tool]:
    return [
        types.Tool(name=t.name, description=t.description, input_schema=t.parameters) for t in toolset().tools
    ]


def _text_result(text: str, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)


class McpMount:
    """The MCP endpoint of one FHIR app: request dispatch, the SDK's session manager, the tool handlers."""

    def __init__(self, app: ASGIApp, registry: TurnRegistry) -> None:
        self.app, self.registry = app, registry
        self.server = Server("rounds-fhir", version="1", on_list_tools=self._list, on_call_tool=self._call)
        self.manager = StreamableHTTPSessionManager(app=self.server, stateless=True, json_response=True)
        self._ready: asyncio.Event | None = None
        self._stop = asyncio.Event()
        self._runner: asyncio.Task | None = None

    async def _run_manager(self) -> None:
        async with self.manager.run():
            assert self._ready is not None
            self._ready.set()
            await self._stop.wait()

    async def _started(self) -> None:
        if self._ready is None:
            self._ready = asyncio.Event()
            self._runner = asyncio.get_running_loop().create_task(self._run_manager())
        await self._ready.wait()

    async def aclose(self) -> None:
        if self._runner is not None:
            self._stop.set()
            await self._runner

    async def handle(self, session_id: str, scope: Scope, receive: Receive, send: Send) -> None:
        store = getattr(getattr(self.app, "state", None), "store", None)
        ctx = await store.get_session_async(session_id) if store is not None else None
        if store is not None and (ctx is None or ctx.ended):
            status, what = (404, "no session") if ctx is None else (410, "ended session")
            await JSONResponse({"error": f"{what} {session_id}"}, status_code=status)(scope, receive, send)
            return
        await self._started()
        _SESSION.set(session_id)
        scope = {**scope, "path_params": {"session_id": session_id}}
        await self.manager.handle_request(scope, receive, send)

    async def _list(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=mcp_tools())

    async def _call(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        request = getattr(ctx, "request", None)
        session_id = (getattr(request, "path_params", None) or {}).get("session_id") or _SESSION.get()
        active = self.registry.active.get(session_id)
        if active is None:
            executor = ToolExecutor(self._own_tools(session_id, request))
            return await self._execute(executor, params, None)
        return await active.run(self._execute(active.executor, params, active))

    async def _execute(
        self, executor: ToolExecutor, params: types.CallToolRequestParams, active: ActiveTurn | None
    ) -> types.CallToolResult:
        try:
            outcome = await call_recorded(executor, params.name, params.arguments or {})
        except SessionFailure as exc:
            if active is not None and active.failure is None:
                active.failure = exc
            return _text_result(f"{exc.reason}: {exc.detail}", is_error=True)
        finally:
            if active is None:
                await executor.tools.http.aclose()
        if outcome.final is not None and active is not None:
            active.answer = outcome.final
        return _text_result(outcome.for_model(), is_error=outcome.error is not None)

    def _own_tools(self, session_id: str, request: Any) -> SessionTools:
        """Tools for a call outside any registered turn: the FHIR app itself and its patient endpoint."""
        root = str(getattr(request, "base_url", "http://rounds.local/")).rstrip("/")
        token = getattr(request, "headers", {}).get("authorization")  # auth on: the caller's own token
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app),
            base_url=f"{root}/sessions/{session_id}/fhir",
            timeout=120,
            headers={"Authorization": token} if token else None,
        )

        async def ask_patient(text: str) -> str:
            response = await client.post(f"{root}/sessions/{session_id}/patient", json={"text": text})
            body = (
                response.json() if response.headers.get("content-type", "").startswith("application/") else {}
            )
            if response.status_code != 200 or not isinstance(body.get("text"), str):
                raise PatientFailure(f"patient endpoint: HTTP {response.status_code}: {response.text[:200]}")
            return body["text"]

        return SessionTools(http=client, ask_patient=ask_patient)


class McpDispatch:
    """Outermost ASGI middleware: `/sessions/<id>/mcp` to the MCP endpoint, everything else to the app."""

    def __init__(self, app: ASGIApp, mount: McpMount) -> None:
        self.app, self.mount = app, mount

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = PATH.match(scope.get("path", "")) if scope["type"] == "http" else None
        if match is None:
            await self.app(scope, receive, send)
            return
        auth = getattr(getattr(self.mount.app, "state", None), "auth", None)  # the FHIR app's, when on
        if auth is not None:
            from services.fhir_api.auth.middleware import admit

            receive = await admit(auth, scope, receive, send)  # the session's token (or a managing one)
            if receive is None:
                return
        await self.mount.handle(match["session"], scope, receive, send)


def mount_mcp(app: Any, registry: TurnRegistry = REGISTRY) -> McpMount:
    """Serve `/sessions/<id>/mcp` on the FHIR app (before it starts); `McpMount.aclose` stops it."""
    mount = McpMount(app, registry)
    app.add_middleware(McpDispatch, mount=mount)
    description = json.loads(OPENAPI.read_text())
    add_paths(app, {"/sessions/{session_id}/mcp": {"post": description["post"]}}, description["schemas"])
    return mount
