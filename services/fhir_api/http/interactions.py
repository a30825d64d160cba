"""The interaction hook: after every request, each callable in `app.state.interaction_listeners` receives an
`Interaction` (the event backbone records the ones made through a session base, and every write).

For the exchanges a listener wants, the response's last body chunk is held until the listeners have run, so
an exchange is recorded before its client has the whole answer (the simulator relies on it: an assistant in
another process cannot answer the physician before its EHR calls are on the log).

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
# wants (a replay of reads on /fhir, say) pass through without the tee, the timing and the Interaction.


def _wanted(listeners: list[InteractionListener], scope: Scope) -> list[InteractionListener]:
    method, path = scope.get("method", ""), scope.get("path", "")
    return [one for one in listeners if (wants := getattr(one, "wants", None)) is None or wants(method, path)]


def _target(path: str, location: str | None) -> tuple[str | None, str | None, str | None]:
    """(session_id, type, id) from /fhir/... or /sessions/<id>/fhir/... (id from Location on create)."""
    parts = [p for p in path.split("/") if p]
    session_id = None
    if len(parts) >= 3 and parts[0] == "sessions" and parts[2] == "fhir":
        session_id, parts = parts[1], parts[3:]
    elif parts[:1] == ["fhir"]:
        parts = parts[1:]
    elif len(parts) >= 2 and parts[0] == "sessions":
        return parts[1], None, None
    else:
        return None, None, None
    type_ = parts[0] if parts and parts[0][:1].isupper() else None
    id_ = parts[1] if type_ and len(parts) > 1 and not parts[1].startswith(("_", "$")) else None
    if type_ and id_ is None and location:
        loc = location.split("/fhir/", 1)[-1].split("/")
        if len(loc) > 1 and loc[0] == type_:
            id_ = loc[1]
    return session_id, type_, id_


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
        seen: dict[str, object] = {"status": 500, "location": None}

        async def tee_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                request_body.append(message.get("body", b""))
            return message

        held: list[Message] = []  # the response's last body message, sent once the listeners are done

        async def tee_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                seen["status"] = message["status"]
                for key, value in message.get("headers", []):
                    if key.lower() == b"location":
                        seen["location"] = value.decode("latin-1")
            elif message["type"] == "http.response.body":
                response_body.append(message.get("body", b""))
                if not message.get("more_body", False):
                    held.append(message)
                    return
            await send(message)

        try:
            await self.app(scope, tee_receive, tee_send)
        finally:
            # Recorded before answered: a client that has the whole response knows its exchange is on the
            # log, so whatever it does next (the assistant's answer, say) is logged after it.
            await self._notify(listeners, scope, started, request_body, response_body, seen)
            for message in held:
                await send(message)

    async def _notify(
        self,
        listeners: list[InteractionListener],
        scope: Scope,
        started: float,
        request_body: list[bytes],
        response_body: list[bytes],
        seen: dict,
    ) -> None:
        path = scope.get("path", "")
        query = scope.get("query_string", b"").decode("latin-1")
        session_id, type_, id_ = _target(path, seen["location"])
        event = Interaction(
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
        )
        for listener in listeners:
            try:
                result = listener(event)
                if asyncio.iscoroutine(result):
                    await result
            except Exception:  # a broken listener must never break the API
                log.exception("interaction listener %r failed", listener)
