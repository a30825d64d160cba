"""The interaction hook: after every request, each callable in `app.state.interaction_listeners` receives an
`Interaction` (the event backbone records the ones made through a session base).

For the exchanges a listener wants, the response's last body chunk is held until the listeners have run, so
an exchange is recorded before its client has the whole answer (the simulator relies on it: an assistant in
another process cannot answer the physician before its EHR calls are on the log); a listener's error is
logged and never reaches the client. A listener with `before_response = True` is a *gate*: the WHOLE
response is held until every gate has returned, and a gate that raises turns it into a 503 OperationOutcome
(the event recorder: a client is never given what is not on the log). The middleware sits outside admission
control (app.py), so a held response has already left its admission slot: recording never takes a slot
from requests waiting to run.

Implemented as plain ASGI middleware: body chunks are kept by reference as they stream (never copied) and
hashed only when a listener reads a digest (most exchanges are not recorded; a search Bundle is tens of KB).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.fhir_api.http import urls

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Interaction:
    """One HTTP exchange with the FHIR API."""

    session_id: str | None  # None for the shared record (/fhir) and non-FHIR paths
    method: str
    url: str  # path + query as requested
    path: str
    query: str
    status: int
    latency_ms: float
    resource_type: str | None
    resource_id: str | None
    request_body: list[bytes] = field(default_factory=list, repr=False, compare=False)  # chunks as received
    response_body: list[bytes] = field(default_factory=list, repr=False, compare=False)  # chunks as sent
    request_content_type: str | None = None
    response_content_type: str | None = None

    @cached_property
    def request_digest(self) -> str:
        """sha256 hex of the request body (of b"" when there is none)."""
        return _sha256(self.request_body)

    @cached_property
    def response_digest(self) -> str:
        """sha256 hex of the response body."""
        return _sha256(self.response_body)


def _sha256(chunks: list[bytes]) -> str:
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk)
    return digest.hexdigest()


InteractionListener = Callable[[Interaction], object]
# A listener may also have `wants(method, path) -> bool`: asked before the exchange, so exchanges no listener
# wants (a replay of reads on /fhir, say) pass through without the tee, the timing and the Interaction; and
# `before_response = True` to be a gate (module docstring).
UNRECORDED = (
    b'{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"transient",'
    b'"diagnostics":"the exchange could not be recorded on the event log; its result was withheld"}]}'
)


def _is_gate(listener: InteractionListener) -> bool:
    return bool(getattr(listener, "before_response", False))


def _withheld() -> list[Message]:
    """The 503 sent instead of a response a gate could not record."""
    headers = [(b"content-type", b"application/fhir+json"),
               (b"content-length", str(len(UNRECORDED)).encode()), (b"retry-after", b"1")]
    return [{"type": "http.response.start", "status": 503, "headers": headers},
            {"type": "http.response.body", "body": UNRECORDED, "more_body": False}]


def _wanted(listeners: list[InteractionListener], scope: Scope) -> list[InteractionListener]:
    method, path = scope.get("method", ""), scope.get("path", "")
    return [one for one in listeners if (wants := getattr(one, "wants", None)) is None or wants(method, path)]


def _target(method: str, path: str, location: str | None) -> tuple[str | None, str | None, str | None]:
    """(session_id, type, id) of a request, by the FHIR URL grammar (urls.py; id from Location on create)."""
    return (urls.session_of(path), *urls.target(method, path, location))


class InteractionMiddleware:
    def __init__(self, app: ASGIApp, listeners: Callable[[], list[InteractionListener]]) -> None:
        self.app = app
        self.listeners = listeners

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        listeners = _wanted(self.listeners(), scope) if scope["type"] == "http" else []
        if not listeners:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        request_body: list[bytes] = []
        response_body: list[bytes] = []
        seen: dict[str, object] = {"status": 500, "location": None, "content_type": None}
        gates = [one for one in listeners if _is_gate(one)]

        async def tee_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                request_body.append(message.get("body", b""))
            return message

        held: list[Message] = []  # sent once the listeners are done: all of it (gates) or its last chunk

        async def tee_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                seen["status"] = message["status"]
                for key, value in message.get("headers", []):
                    name = key.lower()
                    if name == b"location":
                        seen["location"] = value.decode("latin-1")
                    elif name == b"content-type":
                        seen["content_type"] = value.decode("latin-1")
            elif message["type"] == "http.response.body":
                response_body.append(message.get("body", b""))
            if gates or (message["type"] == "http.response.body" and not message.get("more_body", False)):
                held.append(message)  # a gate holds the whole response; other listeners its last chunk
            else:
                await send(message)

        try:
            await self.app(scope, tee_receive, tee_send)
        finally:
            # Recorded before answered: a client that has the whole response knows its exchange is on the
            # log, so whatever it does next (the assistant's answer, say) is logged after it.
            event = self._interaction(scope, started, request_body, response_body, seen)
            if gates:
                held = await self._gate(gates, event, held)
            await self._notify([one for one in listeners if not _is_gate(one)], event)
            for message in held:
                await send(message)

    @staticmethod
    async def _gate(gates: list[InteractionListener], event: Interaction, held: list[Message],
                    ) -> list[Message]:
        """The messages to send: the held response once every gate returned, else the 503."""
        for gate in gates:
            try:
                result = gate(event)
                if asyncio.iscoroutine(result):
                    await result
            except Exception:  # the gate counted and logged its failure; the client must know too
                log.exception("interaction gate %r failed: response withheld", gate)
                return _withheld()
        return held

    @staticmethod
    def _interaction(
        scope: Scope, started: float, request_body: list[bytes], response_body: list[bytes], seen: dict
    ) -> Interaction:
        path = scope.get("path", "")
        query = scope.get("query_string", b"").decode("latin-1")
        session_id, type_, id_ = _target(scope.get("method", ""), path, seen["location"])
        headers = scope.get("headers", ())
        request_type = next((v.decode("latin-1") for k, v in headers if k == b"content-type"), None)
        return Interaction(
            session_id=session_id,
            method=scope.get("method", ""),
            url=f"{path}?{query}" if query else path,
            path=path,
            query=query,
            status=int(seen["status"]),
            latency_ms=round((time.perf_counter() - started) * 1000, 3),
            resource_type=type_,
            resource_id=id_,
            request_body=request_body,
            response_body=response_body,
            request_content_type=request_type,
            response_content_type=seen["content_type"],
        )

    @staticmethod
    async def _notify(listeners: list[InteractionListener], event: Interaction) -> None:
        for listener in listeners:
            try:
                result = listener(event)
                if asyncio.iscoroutine(result):
                    await result
            except Exception:  # a broken listener must never break the API
                log.exception("interaction listener %r failed", listener)
