"""Where the sessions' FHIR server is: in this process (the embedded default) or a separate `rounds serve`.

Embedded: the FHIR app is built here with the event backbone on the run's bus (so its EHR calls land in the
same log), and in-process assistants reach it through httpx's ASGI transport — no sockets, the fastest path.
Assistants in another process (`http:`, MCP clients) need a real URL: `network=True` also serves the same app
with uvicorn on a free loopback port, in this event loop. Remote (`--fhir-base`): sandboxes are opened on the
given server over HTTP, and the patient endpoint is served by the simulator on its own port when needed
(checking the session's token as the server would when auth is on).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import Engine

from events.bus import Bus
from rounds.settings import Settings
from services.fhir_api.auth import service_headers
from services.simulator.assistant_protocol import InfrastructureFailure
from services.simulator.orchestrator.live_session import LiveSession
from services.simulator.orchestrator.patient_http import patient_app, sessions_of
from services.simulator.orchestrator.patient_http import router as patient_router
from services.simulator.orchestrator.transport import Borrowed, StepWatch

LOCAL_ROOT = "http://rounds.local"
OPEN_ATTEMPTS = 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def serve_in_loop(
    app: FastAPI, host: str = "127.0.0.1", port: int = 0
) -> tuple[str, Any, asyncio.Task]:
    """Serve `app` with uvicorn inside the running event loop (a free port unless one is given)."""
    import uvicorn

    from services.fhir_api.http.protocol import uvicorn_options

    port = port or free_port()
    # proxy_headers off: forwarded headers are the app's to judge (services/fhir_api/http/forwarded.py)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                           access_log=False, lifespan="off", proxy_headers=False,
                                           **uvicorn_options()))
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    task = asyncio.create_task(server.serve())
    for _ in range(500):
        if server.started:
            break
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    else:
        raise RuntimeError("uvicorn did not start")
    return f"http://{host}:{port}", server, task


@dataclass
class FhirEnvironment:
    """The FHIR server of a run and how sessions reach it."""

    root: str  # where sessions are opened: <root>/sessions
    transport: httpx.AsyncBaseTransport  # what in-process assistants send their requests through
    app: FastAPI  # the app whose registry the patient endpoint answers from
    patient_root: str  # <patient_root>/sessions/<id>/patient
    _closers: list[Any] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)  # the simulator's own credentials (auth on)
    access_tokens: dict[str, str] = field(default_factory=dict)  # session id -> its token, until taken

    @property
    def sessions(self) -> dict[str, LiveSession]:
        return sessions_of(self.app)

    async def open_session(self, now: datetime, patient: str | None = None,
                           encounter: str | None = None) -> tuple[str, str]:
        """(session id, FHIR base) of a fresh sandbox at `now`; retried, then an InfrastructureFailure.
        With access control on and a `patient` ("Patient/<id>"), the sandbox is opened for that patient, as a
        SMART launch is: its token reads and writes that patient's compartment only, with the `encounter`
        ("Encounter/<id>") as launch context."""
        last: Exception | None = None
        body: dict = {"now": now.isoformat()}
        if patient and self.headers:
            body |= {"patient": patient, **({"encounter": encounter} if encounter else {})}
        async with httpx.AsyncClient(transport=Borrowed(self.transport), base_url=self.root, timeout=60,
                                     headers=self.headers) as client:
            for attempt in range(OPEN_ATTEMPTS):
                try:
                    response = await client.post("/sessions", json=body)
                    if response.status_code == 201:
                        body = response.json()
                        if body.get("accessToken"):
                            self.access_tokens[body["id"]] = body["accessToken"]
                        return body["id"], body["fhirBase"]
                    last = RuntimeError(f"POST /sessions: HTTP {response.status_code} {response.text[:200]}")
                except (httpx.TransportError, ValueError, KeyError) as exc:
                    last = exc
                await asyncio.sleep(0.2 * (attempt + 1))
        raise InfrastructureFailure(f"could not open a sandbox: {last!r}")

    async def end_session(self, session_id: str) -> None:
        """End the sandbox (`POST /sessions/<id>/end`): its FHIR base, and so the token the assistant was
        given, refuses every request from now on; its writes stay for the scorer. Best effort: a failure here
        leaves the session open, as before, and is not the session's outcome."""
        async with httpx.AsyncClient(transport=Borrowed(self.transport), base_url=self.root, timeout=60,
                                     headers=self.headers) as client:
            with contextlib.suppress(httpx.TransportError):
                await client.post(f"/sessions/{session_id}/end")

    async def close(self) -> None:
        for closer in reversed(self._closers):
            result = closer()
            if asyncio.iscoroutine(result):
                await result


async def embedded(
    settings: Settings, engine: Engine, bus: Bus, backbone: Any, *, network: bool = False, mcp: bool = False
) -> FhirEnvironment:
    """The FHIR app in this process on the process's `engine` (its schema at head), recording into `bus`;
    `backbone`: the FHIR API's event wiring (BackboneSettings) the root read; with `mcp`, the per-session MCP
    endpoint (`/sessions/<id>/mcp`, assistants/mcp_server.py) is mounted on
    it too."""
    from services.fhir_api.app import app_on_engine
    from services.fhir_api.backbone.wiring import install_event_backbone

    app = app_on_engine(settings, engine)
    wired = install_event_backbone(app, settings, bus=bus, backbone=backbone)
    app.include_router(patient_router)
    mount = None
    if mcp:
        from services.simulator.assistants.mcp_server import mount_mcp

        mount = mount_mcp(app)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)  # a crash is a 500, as over TCP
    env = FhirEnvironment(LOCAL_ROOT, transport, app, LOCAL_ROOT, headers=service_headers(settings, engine))
    env._closers += [wired.close, app.state.store.close_async] + ([mount.aclose] if mount else [])
    if network:
        # Assistants in another process: their requests are counted and their failures noted by a listener.
        app.state.interaction_listeners.append(StepWatch(env.sessions))
        root, server, task = await serve_in_loop(app)
        env.root = env.patient_root = root
        env._closers.append(lambda: _stop(server, task))
    return env


async def remote(fhir_root: str, settings: Settings, *, network: bool = False, mcp: bool = False,
                 headers: dict[str, str] | None = None, auth: Any = None) -> FhirEnvironment:
    """A separate FHIR server at `fhir_root` (its root, http://host:8080; a trailing /fhir is dropped),
    `settings` saying where the patient endpoint listens; with
    `mcp`, the per-session MCP endpoint is served beside the patient endpoint. `headers`: the simulator's
    credentials for opening sessions when the server has auth on; `auth` (auth.endpoint_auth, on the server's
    key) makes the patient and MCP endpoints served here demand the session's token as the server does."""
    root = fhir_root.rstrip("/").removesuffix("/fhir")
    # Idle connections are dropped before uvicorn's 5 s keep-alive ends them, so a request is not sent on a
    # connection the server is closing (a ReadError charged to the infrastructure for nothing).
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64, keepalive_expiry=2.0)
    transport = httpx.AsyncHTTPTransport(limits=limits)
    app = patient_app(auth)
    env = FhirEnvironment(root, transport, app, root, headers=dict(headers or {}))
    env._closers.append(transport.aclose)
    if mcp:
        from services.simulator.assistants.mcp_server import mount_mcp

        env._closers.append(mount_mcp(app).aclose)
    if network:
        # In a container the webhook must reach the patient endpoint: ROUNDS_SIMULATOR_HOST/PORT say where to
        # listen, ROUNDS_SIMULATOR_URL how others reach it (default: the loopback address it listens on).
        host, port = settings.simulator_host, settings.simulator_port
        patient_root, server, task = await serve_in_loop(app, host, port)
        env.patient_root = (settings.simulator_url or patient_root).rstrip("/")
        env._closers.append(lambda: _stop(server, task))
    return env


async def _stop(server: Any, task: asyncio.Task) -> None:
    server.should_exit = True
    await asyncio.wait_for(task, timeout=10)
