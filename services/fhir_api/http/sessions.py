"""Sessions: copy-on-write sandboxes with an as-of clock, each with its own FHIR base."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from services.fhir_api.http.bundles import bundle, history_entry
from services.fhir_api.http.deps import session_context, store_of
from services.fhir_api.http.errors import FhirHttpError
from services.fhir_api.http.formats import parse_json, read_body, request_media_type
from services.fhir_api.http.links import external_root
from services.fhir_api.http.params import parse_instant
from services.fhir_api.store.interface import Context

router = APIRouter(prefix="/sessions", tags=["sessions"])


class SessionOut(BaseModel):
    id: str
    fhirBase: str = Field(description="absolute FHIR base of the sandbox: <root>/sessions/<id>/fhir")
    now: str | None = Field(
        None, description="the as-of clock; resources with a later clinical time are hidden"
    )


def _describe(request: Request, ctx: Context) -> SessionOut:
    root = external_root(request, request.app.state.settings.base_url)
    return SessionOut(
        id=ctx.session_id,
        fhirBase=f"{root}/sessions/{ctx.session_id}/fhir",
        now=ctx.now.isoformat() if ctx.now else None,
    )


def _json(model: SessionOut, status: int, **headers: str) -> Response:
    return Response(
        model.model_dump_json(), status_code=status, media_type="application/json", headers=headers
    )


async def _parse_now(request: Request) -> datetime | None:
    body = await read_body(request, 64 * 1024)
    if not body.strip():
        return None
    request_media_type(request)
    value = parse_json(body).get("now")
    if value is None:
        return None
    if not isinstance(value, str):
        raise FhirHttpError(400, "now must be a FHIR dateTime string")
    return parse_instant(value, "now")


@router.post(
    "", status_code=201, response_model=SessionOut, summary='open a session (body: {"now": dateTime})'
)
async def create_session(request: Request) -> Response:
    now = await _parse_now(request)
    store = store_of(request)
    created = await run_in_threadpool(store.create_session, now)
    ctx = created if isinstance(created, Context) else Context(str(created), now)
    out = _describe(request, ctx)
    return _json(out, 201, Location=out.fhirBase.rsplit("/fhir", 1)[0])


@router.get("/{session_id}", response_model=SessionOut, summary="describe a session")
async def get_session(session_id: str, request: Request) -> Response:
    return _json(_describe(request, await session_context(request, session_id)), 200)


@router.delete("/{session_id}", status_code=204, summary="discard a session and all its writes")
async def delete_session(session_id: str, request: Request) -> Response:
    await session_context(request, session_id)
    await run_in_threadpool(store_of(request).drop_session, session_id)
    return Response(status_code=204)


@router.get(
    "/{session_id}/writes",
    summary="the session's writes: current version of each resource it created, updated or deleted",
)
async def session_writes(session_id: str, request: Request) -> Response:
    """A history Bundle with one entry per written resource (its current version; a deletion has no
    resource, `request.method` DELETE). Scorers read a sandbox's final state here without going through
    the session's FHIR base, so their reads are not recorded as the assistant's EHR calls."""
    await session_context(request, session_id)
    stored = await run_in_threadpool(store_of(request).session_writes, session_id)
    root = external_root(request, request.app.state.settings.base_url)
    base = f"{root}/sessions/{session_id}/fhir"
    body = bundle("history", [history_entry(base, item) for item in stored], total=len(stored))
    return Response(body, media_type="application/fhir+json")
