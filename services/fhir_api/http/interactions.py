"""The interaction hook: after every request, each callable in `app.state.interaction_listeners` receives an
`Interaction` (the event backbone records the ones made through a session base, and every write).

Implemented as plain ASGI middleware so bodies are hashed as they stream, never buffered twice.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

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
    request_digest: str  # sha256 hex of the request body (of b"" when there is none)
    response_digest: str  # sha256 hex of the response body
    resource_type: str | None
    resource_id: str | None


InteractionListener = Callable[[Interaction], object]


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
        if scope["type"] != "http" or not self.listeners():
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        req_hash, resp_hash = hashlib.sha256(), hashlib.sha256()
        seen: dict[str, object] = {"status": 500, "location": None}

        async def tee_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                req_hash.update(message.get("body", b""))
            return message

        async def tee_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                seen["status"] = message["status"]
                for key, value in message.get("headers", []):
                    if key.lower() == b"location":
                        seen["location"] = value.decode("latin-1")
            elif message["type"] == "http.response.body":
                resp_hash.update(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, tee_receive, tee_send)
        finally:
            await self._notify(scope, started, req_hash, resp_hash, seen)

    async def _notify(self, scope: Scope, started: float, req_hash, resp_hash, seen: dict) -> None:
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
            request_digest=req_hash.hexdigest(),
            response_digest=resp_hash.hexdigest(),
            resource_type=type_,
            resource_id=id_,
        )
        for listener in list(self.listeners()):
            try:
                result = listener(event)
                if asyncio.iscoroutine(result):
                    await result
            except Exception:  # a broken listener must never break the API
                log.exception("interaction listener %r failed", listener)
