"""The FHIR REST router, mounted at /fhir and at /sessions/{session_id}/fhir.

Routes are thin: parse the HTTP shape, run one operation (crud/search/transaction) in the thread pool, render.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from fastapi import APIRouter, Depends, Request, Response
from starlette.concurrency import run_in_threadpool

from services.fhir_api.auth import smart
from services.fhir_api.bulk import http as bulk
from services.fhir_api.http import cors, crud, request_limits, search, transaction
from services.fhir_api.http.capability import capability_statement
from services.fhir_api.http.deps import call_of
from services.fhir_api.http.errors import FhirHttpError
from services.fhir_api.http.formats import (
    FORM,
    JSON_PATCH,
    JSON_TYPES,
    MERGE_PATCH,
    parse_json,
    read_body,
    read_resource,
    request_media_type,
)
from services.fhir_api.http.links import external_root
from services.fhir_api.http.outcome import Call, Outcome, to_response
from services.fhir_api.http.params import check_id, parse_etag, parse_version
from services.fhir_api.http.validation import check_type
from services.fhir_api.subscriptions import status as subscriptions

router = APIRouter()
CallDep = Depends(call_of)


async def run(call: Call, op: Callable[..., Outcome], *args: Any) -> Response:
    return to_response(call, await run_in_threadpool(op, call, *args))


def query(request: Request) -> list[tuple[str, str]]:
    return list(request.query_params.multi_items())


def criteria(request: Request) -> list[tuple[str, str]]:
    """Conditional criteria in the query string (what fhirpy sends), without format parameters."""
    return search.bounded(search.split_params(query(request))[1])


def limit(request: Request) -> int:
    return request.app.state.max_body_bytes


@router.get("/metadata", summary="CapabilityStatement")
async def metadata(request: Request, call: Call = CallDep) -> Response:
    on = request.app.state.auth is not None
    settings = request.app.state.settings
    security = smart.security(external_root(request, settings), cors.enabled(settings)) if on else None
    limits = request_limits.documentation(limit(request))
    body = await run_in_threadpool(capability_statement, call.base, security, limits)
    return Response(body, media_type=call.media_type)


@router.post("", summary="batch or transaction Bundle")
@router.post("/", include_in_schema=False)
async def batch(request: Request, call: Call = CallDep) -> Response:
    doc = await read_resource(request, limit(request))
    return await run(call, transaction.process, doc)


@router.get("", summary="system search")
@router.get("/", include_in_schema=False)
async def system_search(request: Request, call: Call = CallDep) -> Response:
    return await run(call, search.search, None, query(request))


@router.get("/_history", summary="system history")
async def system_history(request: Request, call: Call = CallDep) -> Response:
    return await run(call, search.history, None, None, query(request))


@router.get("/$export", summary="Bulk Data $export of the whole base")
async def export_system(request: Request, call: Call = CallDep) -> Response:
    return await bulk.kickoff(call, request, "system")


@router.post("/$export", summary="Bulk Data $export of the whole base (Parameters body)")
async def export_system_post(request: Request, call: Call = CallDep) -> Response:
    return await bulk.kickoff(call, request, "system", body=await read_resource(request, limit(request)))


@router.get("/$export-poll-status", summary="Bulk Data export status")
async def export_status(request: Request, call: Call = CallDep) -> Response:
    return await bulk.status(call, request)


@router.delete("/$export-poll-status", summary="cancel a Bulk Data export")
async def export_cancel(request: Request, call: Call = CallDep) -> Response:
    return await bulk.cancel(call, request)


@router.get("/{type}", summary="search")
async def search_type(type: str, request: Request, call: Call = CallDep) -> Response:
    params = query(request)
    wanted = search.search_request(call, check_type(type), params)
    found = await call.store.search_async(call.ctx, wanted)  # on the event loop where it can
    return to_response(call, search.search_outcome(call, wanted, params, found))


@router.post("/{type}/_search", summary="search (form body)")
async def search_post(type: str, request: Request, call: Call = CallDep) -> Response:
    check_type(type)
    request_media_type(request, frozenset({FORM}))
    body = await read_body(request, limit(request))
    try:
        form = parse_qsl(body.decode(), keep_blank_values=True, strict_parsing=bool(body.strip()))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FhirHttpError(400, f"malformed form body: {exc}") from exc
    return await run(call, search.search, type, [*query(request), *form])


@router.get("/{type}/_history", summary="type history")
async def type_history(type: str, request: Request, call: Call = CallDep) -> Response:
    return await run(call, search.history, check_type(type), None, query(request))


@router.post("/{type}", summary="create (If-None-Exist for conditional create)")
async def create(type: str, request: Request, call: Call = CallDep) -> Response:
    check_type(type)
    resource = await read_resource(request, limit(request))
    header = request.headers.get("if-none-exist")
    conditions = parse_qsl(header.split("?", 1)[-1], keep_blank_values=True) if header else criteria(request)
    return await run(call, crud.create, type, resource, conditions)


@router.put("/{type}", summary="conditional update")
async def conditional_update(type: str, request: Request, call: Call = CallDep) -> Response:
    check_type(type)
    conditions = criteria(request)
    if not conditions:
        raise FhirHttpError(400, "PUT needs a resource id in the URL or search criteria")
    resource = await read_resource(request, limit(request))
    return await run(call, crud.conditional_update, type, resource, conditions)


async def _patch_document(request: Request) -> Any:
    media = request_media_type(request, frozenset({JSON_PATCH, MERGE_PATCH, *JSON_TYPES}))
    body = await read_body(request, limit(request))
    return parse_json(body, expect=list if media == JSON_PATCH else dict)


@router.patch("/{type}", summary="conditional patch")
async def conditional_patch(type: str, request: Request, call: Call = CallDep) -> Response:
    check_type(type)
    return await run(call, crud.conditional_patch, type, criteria(request), await _patch_document(request))


@router.delete("/{type}", summary="conditional delete")
async def conditional_delete(type: str, request: Request, call: Call = CallDep) -> Response:
    check_type(type)
    return await run(call, crud.conditional_delete, type, criteria(request))


@router.post("/{type}/$export", summary="Patient/$export with a Parameters body")
@router.get("/{type}/$export", summary="Bulk Data $export of every patient (Patient/$export)")
async def export_type(type: str, request: Request, call: Call = CallDep) -> Response:
    if check_type(type) != "Patient":
        raise FhirHttpError(404, "$export at type level is defined on Patient only", code="not-supported")
    body = await read_resource(request, limit(request)) if request.method == "POST" else None
    return await bulk.kickoff(call, request, "patient", body=body)


@router.post("/{type}/{id}/$export", summary="Group/<id>/$export with a Parameters body")
@router.get("/{type}/{id}/$export", summary="Bulk Data $export of a Group's patients")
async def export_instance(type: str, id: str, request: Request, call: Call = CallDep) -> Response:
    if check_type(type) != "Group":
        raise FhirHttpError(404, "$export at instance level is defined on Group only", code="not-supported")
    body = await read_resource(request, limit(request)) if request.method == "POST" else None
    return await bulk.kickoff(call, request, "group", check_id(id), body=body)


@router.get("/$export-file/{job}/{file}", summary="a file a Bulk Data export wrote")
async def export_file(job: str, file: str, request: Request, call: Call = CallDep) -> Response:
    return await bulk.file(call, request, job, file)


@router.post("/{type}/{id}/$status", summary="Subscription/<id>/$status (Subscriptions Backport IG)")
@router.get("/{type}/{id}/$status", summary="Subscription/<id>/$status (Subscriptions Backport IG)")
async def subscription_status(type: str, id: str, call: Call = CallDep) -> Response:
    if type != "Subscription":
        raise FhirHttpError(404, "$status is defined on Subscription only", code="not-supported")
    return await run(call, subscriptions.subscription_status, check_id(id))


@router.get("/{type}/{id}/$everything", summary="Patient/$everything")
async def everything(type: str, id: str, request: Request, call: Call = CallDep) -> Response:
    if type != "Patient":
        raise FhirHttpError(404, "$everything is defined on Patient only", code="not-supported")
    return await run(call, search.everything, check_id(id), query(request))


@router.get("/{type}/{id}", summary="read")
async def read(type: str, id: str, request: Request, call: Call = CallDep) -> Response:
    if_none_match = request.headers.get("if-none-match")
    etag = parse_etag(if_none_match) if if_none_match else None
    stored = await call.store.read_async(call.ctx, check_type(type), check_id(id))  # no thread: one statement
    return to_response(call, crud.read_outcome(stored, etag))


@router.put("/{type}/{id}", summary="update (or create with a client id)")
async def update(type: str, id: str, request: Request, call: Call = CallDep) -> Response:
    check_type(type)
    check_id(id)
    if_match = parse_etag(request.headers.get("if-match"))
    resource = await read_resource(request, limit(request))
    return await run(call, crud.update, type, id, resource, if_match)


@router.patch("/{type}/{id}", summary="patch (JSON Patch or JSON Merge Patch)")
async def patch(type: str, id: str, request: Request, call: Call = CallDep) -> Response:
    check_type(type)
    check_id(id)
    if_match = parse_etag(request.headers.get("if-match"))
    return await run(call, crud.patch, type, id, await _patch_document(request), if_match)


@router.delete("/{type}/{id}", summary="delete")
async def delete(type: str, id: str, call: Call = CallDep) -> Response:
    return await run(call, crud.delete, check_type(type), check_id(id))


@router.get("/{type}/{id}/_history", summary="instance history")
async def instance_history(type: str, id: str, request: Request, call: Call = CallDep) -> Response:
    return await run(call, search.history, check_type(type), check_id(id), query(request))


@router.get("/{type}/{id}/_history/{version}", summary="vread")
async def vread(type: str, id: str, version: str, call: Call = CallDep) -> Response:
    return await run(call, crud.vread, check_type(type), check_id(id), parse_version(version))
