"""Request-scoped dependencies: the store, the Context (shared record or session), and the assembled Call."""

from __future__ import annotations

from fastapi import Depends, Request

from services.fhir_api.http.errors import FhirHttpError
from services.fhir_api.http.formats import response_media_type
from services.fhir_api.http.links import fhir_base
from services.fhir_api.http.outcome import Call
from services.fhir_api.http.params import Prefer
from services.fhir_api.http.summary import Subset
from services.fhir_api.store.interface import Context, ResourceStore


def store_of(request: Request) -> ResourceStore:
    return request.app.state.store


async def session_context(request: Request, session_id: str, live: bool = False) -> Context:
    """The session's Context (404 if it does not exist); with `live`, 410 once it ended: an ended session's
    FHIR base refuses every request, so no token of it (kept by an assistant) reads anything any more."""
    ctx = await store_of(request).get_session_async(session_id)
    if ctx is None:
        raise FhirHttpError(404, f"unknown session {session_id[:80]!r}")
    if live and ctx.ended:
        raise FhirHttpError(410, f"session {session_id[:80]!r} has ended: its FHIR base answers no more",
                            code="expired")
    return ctx


async def context_of(request: Request) -> Context:
    """Context() for /fhir; the session's Context for /sessions/<id>/fhir (404 if it does not exist, 410
    once it ended)."""
    session_id = request.path_params.get("session_id")
    return Context() if session_id is None else await session_context(request, session_id, live=True)


async def call_of(request: Request, ctx: Context = Depends(context_of)) -> Call:
    query = request.query_params
    return Call(
        store=store_of(request),
        ctx=ctx,
        base=fhir_base(request, request.app.state.settings),
        prefer=Prefer.of(request),
        subset=Subset.parse(query.get("_summary"), query.get("_elements")),
        media_type=response_media_type(request),
        guard=request.scope.get("state", {}).get("guard"),  # services/fhir_api/auth/guard.py
        write_checks=getattr(request.app.state, "write_checks", {}),
        event_numbers=getattr(request.app.state, "event_numbers", None),
    )
