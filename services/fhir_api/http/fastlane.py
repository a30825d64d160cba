"""The fast lane: GET read and GET search on a FHIR base (the shared record or a session) reach their route
functions without FastAPI's route matching and dependency injection, which cost about as much CPU as the read
itself. Everything else (other methods and paths) goes through the app as before.

Same answers by construction: the lane runs the routes' own functions (routes.read, routes.search_type) with
the same dependencies (deps.context_of, deps.call_of), and renders client errors with the app's own handler.
Unexpected exceptions propagate to the app's ServerErrorMiddleware, as they would from a route.
"""

from __future__ import annotations

import re

from fastapi import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from services.fhir_api.http import routes
from services.fhir_api.http.deps import call_of, context_of
from services.fhir_api.http.errors import FhirHttpError, fhir_error
from services.fhir_api.store.interface import StoreError

# routes.router's GET /{type} and GET /{type}/{id} under both prefixes, as Starlette matches them.
_PATH = re.compile(r"^(?:/sessions/(?P<session_id>[^/]+))?/fhir/(?P<type>[^/]+)(?:/(?P<id>[^/]+))?$")
_OTHER_ROUTES = {("metadata", None), ("_history", None)}  # GET /metadata and /_history precede /{type}


class FastLane:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = _PATH.match(scope["path"]) if scope["type"] == "http" and scope["method"] == "GET" else None
        if (
            match is None
            or (match["type"], match["id"]) in _OTHER_ROUTES
            or match["id"] == "_history"  # GET /{type}/_history precedes /{type}/{id}
        ):
            await self.app(scope, receive, send)
            return
        scope["path_params"] = {k: v for k, v in match.groupdict().items() if v is not None}
        request = Request(scope, receive)
        try:
            call = await call_of(request, await context_of(request))
            if match["id"] is None:
                response = await routes.search_type(match["type"], request, call)
            else:
                response = await routes.read(match["type"], match["id"], request, call)
        except (FhirHttpError, StoreError) as exc:
            response = await fhir_error(request, exc)
        await response(scope, receive, send)
