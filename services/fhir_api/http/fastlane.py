"""The fast lane: GET read and GET search on a FHIR base (the shared record or a session) reach their route
functions without FastAPI's route matching and dependency injection, which cost about as much CPU as the read
itself. Everything else (other methods and paths) goes through the app as before.

Same answers by construction: the lane runs the routes' own functions (routes.read, routes.search_type) with
the same dependencies (deps.context_of, deps.call_of), and renders client errors with the app's own handler.
Unexpected exceptions propagate to the app's CatchAll (http/errors.py), as they would from a route.
"""

from __future__ import annotations

from fastapi import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from services.fhir_api.http import routes, urls
from services.fhir_api.http.deps import call_of, context_of
from services.fhir_api.http.errors import FhirHttpError, fhir_error
from services.fhir_api.store.interface import StoreError


class FastLane:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        base = urls.on_base(scope["path"]) if scope["type"] == "http" and scope["method"] == "GET" else None
        found = urls.match("GET", base.rest) if base is not None else None
        if found is None or not found.route.fast or base.rest.endswith("/"):  # the router's own, as routed
            await self.app(scope, receive, send)
            return
        params = found.params
        scope["path_params"] = {**params, "session_id": base.session_id} if base.session_id else params
        request = Request(scope, receive)
        try:
            call = await call_of(request, await context_of(request))
            if found.route.name == "search-type":
                response = await routes.search_type(params["type"], request, call)
            else:
                response = await routes.read(params["type"], params["id"], request, call)
        except (FhirHttpError, StoreError) as exc:
            response = await fhir_error(request, exc)
        await response(scope, receive, send)
