"""How an in-process assistant reaches the FHIR server: an httpx transport per session.

It confines the assistant to its own session (requests outside the session's FHIR base and patient endpoint
get a 403 OperationOutcome, so one session can neither read nor write another's sandbox or the shared
record), counts each request as a step, writes the session's queued simulator events first (so the FHIR
server's `rounds.ehr.*` land after them in the log), and notes server failures (5xx, broken connection) so
a turn that fails because of them is charged to the infrastructure. `SyncBridge` gives synchronous `python:`
assistants (run in a worker thread) the same transport through the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

import httpx

from services.simulator.assistant_protocol import SessionFailure
from services.simulator.orchestrator.live_session import LiveSession


def _refusal(detail: str) -> httpx.Response:
    outcome = {
        "resourceType": "OperationOutcome",
        "issue": [{"severity": "error", "code": "forbidden", "diagnostics": detail}],
    }
    return httpx.Response(403, headers={"content-type": "application/fhir+json"},
                          content=json.dumps(outcome).encode())


SAFE_METHODS = frozenset({"GET", "HEAD"})


class Borrowed(httpx.AsyncBaseTransport):
    """The run's shared transport lent to one short-lived client: closing the client must not close it.
    (An `async with httpx.AsyncClient(transport=shared)` closes the shared connection pool on exit, which
    broke every other session's request in flight over TCP.)"""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        return None


class SessionTransport(Borrowed):
    """One session's view of the run's shared transport (borrowed: closing the session's client leaves it)."""

    def __init__(self, inner: httpx.AsyncBaseTransport, live: LiveSession) -> None:
        super().__init__(inner)
        self.live = live
        self.allowed = (live.fhir_base.rstrip("/") + "/", live.fhir_base.rstrip("/") + "?")
        self.fhir_base = live.fhir_base.rstrip("/")

    def _inside(self, url: str) -> bool:
        return url == self.fhir_base or url.startswith(self.allowed) or url == self.live.patient_url

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        live = self.live
        url = str(request.url)
        if not self._inside(url):
            live.check_open()
            return _refusal(f"outside this session's FHIR base {self.fhir_base}")
        live.count_request(request.method, url)
        if live.access_token and "authorization" not in request.headers:  # also for SyncBridge's requests
            request.headers["Authorization"] = f"Bearer {live.access_token}"
        await live.log.flush(live.session_id)
        try:
            response = await self.inner.handle_async_request(request)
        except (httpx.ReadError, httpx.RemoteProtocolError) as exc:
            if request.method not in SAFE_METHODS:  # a write may have happened: never sent twice
                live.fault(f"{request.method} {url}: {exc!r}")
                raise
            try:  # a pooled connection the server had just closed: a read is safe to send once more
                response = await self.inner.handle_async_request(request)
            except httpx.TransportError as again:
                live.fault(f"{request.method} {url}: {again!r}")
                raise
        except httpx.TransportError as exc:
            live.fault(f"{request.method} {url}: {exc!r}")
            raise
        if response.status_code >= 500:
            live.fault(f"{request.method} {url}: HTTP {response.status_code}")
        return response


class SyncBridge(httpx.BaseTransport):
    """A synchronous transport for code running in a worker thread: each request is sent by `client` (an
    AsyncClient on the session transport) on `loop`, so it is confined, counted and recorded the same way."""

    def __init__(self, client: httpx.AsyncClient, loop: asyncio.AbstractEventLoop) -> None:
        self.client, self.loop = client, loop

    async def _send(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        forwarded = httpx.Request(request.method, request.url, headers=request.headers, content=body)
        response = await self.client.send(forwarded)
        content = await response.aread()
        await response.aclose()
        return httpx.Response(response.status_code, headers=response.headers, content=content,
                              request=request)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return asyncio.run_coroutine_threadsafe(self._send(request), self.loop).result()


class StepWatch:
    """Interaction listener on the in-process FHIR app for assistants in another process (`http:`, MCP
    agents): their requests reach the app over the loopback port, not through a SessionTransport, so each one
    is counted and its failures noted here, after the fact (a turn past the limit ends with `max_steps`)."""

    def __init__(self, sessions: dict[str, LiveSession]) -> None:
        self.sessions = sessions

    @staticmethod
    def wants(method: str, path: str) -> bool:
        parts = path.split("/")
        return len(parts) > 3 and parts[1] == "sessions" and parts[3] == "fhir"

    def __call__(self, interaction) -> None:
        live = self.sessions.get(interaction.session_id or "")
        if live is None or live.closed:
            return
        if interaction.status >= 500:
            live.fault(f"{interaction.method} {interaction.path}: HTTP {interaction.status}")
        with contextlib.suppress(SessionFailure):  # noted on the live session: the turn ends with its reason
            live.count_request(interaction.method, interaction.path)
