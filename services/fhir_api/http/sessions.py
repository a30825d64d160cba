"""Sessions: copy-on-write sandboxes with an as-of clock, each with its own FHIR base."""

from __future__ import annotations

from datetime import datetime

import orjson
from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from services.fhir_api.http.bundles import bundle, history_entry
from services.fhir_api.http.deps import session_context, store_of
from services.fhir_api.http.errors import FhirHttpError
from services.fhir_api.http.formats import parse_json, read_body, request_media_type
from services.fhir_api.http.links import external_root
from services.fhir_api.http.params import check_id, parse_instant
from services.fhir_api.store.interface import Context, StoreError

router = APIRouter(prefix="/sessions", tags=["sessions"])


class SessionOut(BaseModel):
    id: str
    fhirBase: str = Field(description="absolute FHIR base of the sandbox: <root>/sessions/<id>/fhir")
    now: str | None = Field(
        None, description="the as-of clock; resources with a later clinical time are hidden"
    )
    patient: str | None = Field(None, description="Patient/<id> the session was opened for, if any")
    encounter: str | None = Field(
        None, description="Encounter/<id>: the launch's encounter context (a stay of the patient, known at "
        "now); context as in a SMART launch, not a filter: the patient's compartment at the clock stays "
        "readable"
    )
    accessToken: str | None = Field(
        None, description="with access control on (ROUNDS_AUTH): a bearer token valid only on this session's "
        "FHIR base (read + write; with a patient, only that patient's compartment). Given once, on creation."
    )


def _describe(request: Request, ctx: Context) -> SessionOut:
    root = external_root(request, request.app.state.settings)
    return SessionOut(
        id=ctx.session_id,
        fhirBase=f"{root}/sessions/{ctx.session_id}/fhir",
        now=ctx.now.isoformat() if ctx.now else None,
    )


OPTIONAL = ("patient", "encounter", "accessToken")  # left out of the answer when unset


def _json(model: SessionOut, status: int, **headers: str) -> Response:
    return Response(
        model.model_dump_json(exclude={k for k in OPTIONAL if getattr(model, k) is None}),
        status_code=status, media_type="application/json", headers=headers
    )


async def _parse_body(request: Request) -> tuple[datetime | None, str | None, str | None]:
    """(now, patient id, encounter id) from `{"now": dateTime, "patient": "Patient/<id>" | "<id>",
    "encounter": "Encounter/<id>" | "<id>"}`, all optional; an encounter only with its patient."""
    body = await read_body(request, 64 * 1024)
    if not body.strip():
        return None, None, None
    request_media_type(request)
    doc = parse_json(body)
    value, patient, encounter = doc.get("now"), doc.get("patient"), doc.get("encounter")
    if value is not None and not isinstance(value, str):
        raise FhirHttpError(400, "now must be a FHIR dateTime string")
    if patient is not None:
        if not isinstance(patient, str):
            raise FhirHttpError(400, 'patient must be "Patient/<id>"')
        patient = check_id(patient.removeprefix("Patient/"))
    if encounter is not None:
        if not isinstance(encounter, str) or patient is None:
            raise FhirHttpError(400, 'encounter must be "Encounter/<id>", given with its patient')
        encounter = check_id(encounter.removeprefix("Encounter/"))
    return (parse_instant(value, "now") if value is not None else None), patient, encounter


async def _check_encounter(store, now: datetime | None, patient: str, encounter: str) -> None:
    """The launch's encounter must be a stay of its patient that the clock already shows (a SMART EHR
    launches from an open chart, never from a stay that has not begun)."""
    try:
        found = await store.read_async(Context(None, now), "Encounter", encounter)
    except StoreError as exc:
        raise FhirHttpError(400, f"encounter: no Encounter/{encounter} in the record at {now}") from exc
    subject = (orjson.loads(found.raw).get("subject") or {}).get("reference", "")
    if subject.removeprefix("Patient/") != patient:
        raise FhirHttpError(400, f"encounter: Encounter/{encounter} is not a stay of Patient/{patient}")


@router.post(
    "", status_code=201, response_model=SessionOut,
    summary='open a session (body: {"now": dateTime, "patient": "Patient/<id>", '
            '"encounter": "Encounter/<id>"}, all optional)',
)
async def create_session(request: Request) -> Response:
    now, patient, encounter = await _parse_body(request)
    store = store_of(request)
    if patient is not None:
        try:
            await store.read_async(Context(None, now), "Patient", patient)
        except StoreError as exc:
            raise FhirHttpError(400, f"patient: no Patient/{patient} in the record at {now}") from exc
    if encounter is not None:
        await _check_encounter(store, now, patient, encounter)
    created = await run_in_threadpool(store.create_session, now)
    ctx = created if isinstance(created, Context) else Context(str(created), now)
    out = _describe(request, ctx)
    if patient is not None:
        out.patient = f"Patient/{patient}"
    if encounter is not None:
        out.encounter = f"Encounter/{encounter}"
    auth = request.app.state.auth
    if auth is not None:
        out.accessToken = auth.session_token(ctx.session_id, patient, encounter)
    return _json(out, 201, Location=out.fhirBase.rsplit("/fhir", 1)[0])


@router.get("/{session_id}", response_model=SessionOut, summary="describe a session")
async def get_session(session_id: str, request: Request) -> Response:
    return _json(_describe(request, await session_context(request, session_id)), 200)


@router.delete("/{session_id}", status_code=204, summary="discard a session and all its writes")
async def delete_session(session_id: str, request: Request) -> Response:
    await session_context(request, session_id)
    await run_in_threadpool(store_of(request).drop_session, session_id)
    return Response(status_code=204)


@router.post("/{session_id}/end", status_code=204,
             summary="end a session: its FHIR base (and so its token) refuses every request; its writes stay")
async def end_session(session_id: str, request: Request) -> Response:
    """What `rounds run` does as each session ends, so no token an assistant kept reads the sandbox again
    (a SMART launch's token ends with the launch); `/writes` keeps answering for the scorer."""
    await session_context(request, session_id)
    await run_in_threadpool(store_of(request).end_session, session_id)
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
    root = external_root(request, request.app.state.settings)
    base = f"{root}/sessions/{session_id}/fhir"
    body = bundle("history", [history_entry(base, item) for item in stored], total=len(stored))
    return Response(body, media_type="application/fhir+json")
