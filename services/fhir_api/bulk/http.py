"""The HTTP side of `$export`: kick-off, status polling, cancel and the files (Bulk Data Access v2).

- Kick-off: `GET <base>/$export`, `<base>/Patient/$export`, `<base>/Group/<id>/$export` with
  `Prefer: respond-async` → 202, `Content-Location: <base>/$export-poll-status?_jobId=<id>`; the writer runs
  in a thread of this process (export.py). `_type`, `_since`, `_outputFormat` (NDJSON only), `_typeFilter`,
  `_elements` (elements.py); anything else the spec defines (`includeAssociatedData`, `patient`) → 400,
  never silently ignored. `Prefer: handling=lenient` turns an unknown or unreadable `_type` into a line of
  the error file (export.py `ERRORS`) instead of a refusal.
- Status: 202 with `X-Progress` and `Retry-After` while writing; 200 with the manifest when complete; a failed
  job 500 with an OperationOutcome. `DELETE` on the same URL cancels and removes the files (202), then 404.
- Files: `<base>/$export-file/<id>/<Type>.ndjson` (`application/fhir+ndjson`), streamed from disk.

A job answers only on the base it was asked on (a session's export is not visible from `/fhir` or another
session); access control applies as to any operation on that base.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from urllib.parse import parse_qsl, unquote, urlencode

import orjson
from fastapi import Request, Response
from fastapi.responses import FileResponse
from starlette.concurrency import run_in_threadpool

from services.fhir_api.auth.scopes import granting
from services.fhir_api.bulk.elements import parse_elements
from services.fhir_api.bulk.export import ERRORS, run_export
from services.fhir_api.bulk.jobs import ExportJob, JobStore, Level
from services.fhir_api.bulk.quota import ExportQuota, disk_check, refusal, sweep, token_key
from services.fhir_api.http.errors import FhirHttpError
from services.fhir_api.http.outcome import Call
from services.fhir_api.http.params import check_id, parse_instant
from services.fhir_api.http.validation import served_types
from services.fhir_api.search.registry import filterable
from services.fhir_api.store.interface import StoreError
from services.fhir_api.store.rows import instant

FORMATS = frozenset({"application/fhir+ndjson", "application/ndjson", "ndjson"})
KNOWN = frozenset({"_type", "_since", "_outputFormat", "_format", "_typeFilter", "_elements"})
Params = list[tuple[str, str]]


def jobs_of(request: Request) -> JobStore:
    return JobStore(request.app.state.settings.bulk_dir)


def quota_of(request: Request) -> ExportQuota:
    s = request.app.state.settings
    return ExportQuota(s.export_jobs_per_token, s.export_jobs_per_session, s.export_expiry_hours * 3600,
                       s.export_disk_bytes)


def _job(call: Call, request: Request, level: Level, group: str | None, params: Params) -> ExportJob:
    if "respond-async" not in request.headers.get("prefer", ""):
        raise FhirHttpError(400, "$export is asynchronous: send 'Prefer: respond-async'")
    unknown = sorted({name for name, _ in params} - KNOWN)
    if unknown:
        raise FhirHttpError(400, f"$export does not support {', '.join(unknown)}", code="not-supported")
    given = dict(params)
    if given.get("_outputFormat", "application/fhir+ndjson") not in FORMATS:
        raise FhirHttpError(400, "_outputFormat: only application/fhir+ndjson is written")
    types = [t for name, value in params if name == "_type" for t in value.split(",") if t] or None
    lenient = "handling=lenient" in request.headers.get("prefer", "").replace(" ", "").lower()
    issues: list[str] = []
    bad = sorted(set(types or ()) - served_types())
    if bad and not (lenient and set(types or ()) - set(bad)):
        raise FhirHttpError(400, f"_type: unknown resource types {', '.join(bad)}")
    if bad:  # Prefer: handling=lenient (Bulk Data IG): the others are exported, these named in `error`
        issues.append(f"_type: unknown resource types {', '.join(bad)}: not exported")
        types = [t for t in types or () if t not in bad]
    since = given.get("_since")
    if since is not None:
        since = instant(parse_instant(since, "_since"))
    filters = type_filters([value for name, value in params if name == "_typeFilter"], types)
    elements = parse_elements([value for name, value in params if name == "_elements"])
    types = _permitted(request, level, types, issues if lenient else None)
    return ExportJob(level, str(request.url), instant(datetime.now(UTC)), call.ctx.session_id, group, types,
                     since, token=token_key(request.headers.get("authorization")), type_filters=filters,
                     elements=elements, issues=issues)


def type_filters(values: list[str], types: list[str] | None) -> dict[str, list[str]]:
    """`_typeFilter` (repeated, or comma-separated with the commas inside a filter %-escaped): type ->
    its queries. Each must name an exported type and only parameters this server searches that type by."""
    filters: dict[str, list[str]] = {}
    for piece in (unquote(p) for value in values for p in value.split(",") if p):
        resource_type, sep, query = piece.partition("?")
        if not sep or not query or resource_type not in served_types():
            raise FhirHttpError(400, f"_typeFilter {piece[:120]!r}: expected <ResourceType>?<parameters>")
        if types is not None and resource_type not in types:
            raise FhirHttpError(400, f"_typeFilter {piece[:120]!r}: {resource_type} is not in _type")
        refused = [name for name, _ in parse_qsl(query, keep_blank_values=True)
                   if not filterable(resource_type, name)]
        if refused:
            raise FhirHttpError(400, f"_typeFilter {piece[:120]!r}: {', '.join(refused)} is not a search "
                                     f"parameter of {resource_type} here", code="not-supported")
        filters.setdefault(resource_type, []).append(query)
    return filters


def _permitted(request: Request, level: Level, types: list[str] | None, lenient: list[str] | None
               ) -> list[str] | None:
    """Hold the export to the token's scopes (auth on): each asked type must be readable outside any
    compartment (`user/` or `system/` `.s`); without `_type`, a token that cannot read every type exports
    the types it can (SMART Backend Services clients ask for `system/<Type>.read` one by one). With
    `Prefer: handling=lenient` (`lenient`: the job's issues) asked types it may not read are left out and
    named in the error file, as long as one is left."""
    grant = request.scope.get("state", {}).get("auth_grant")
    if grant is None or granting(grant.scopes, "*", "s") & {"user", "system"}:
        return types
    readable = [t for t in (types or sorted(served_types()))
                if granting(grant.scopes, t, "s") & {"user", "system"}]
    missing = sorted(set(types or ()) - set(readable))
    if missing and readable and lenient is not None:
        lenient.append(f"the token's scopes do not allow exporting {', '.join(missing)}: not exported")
        return readable
    if missing or not readable:
        what = ", ".join(missing) or "any type"
        raise FhirHttpError(403, f"the token's scopes do not allow exporting {what}", code="forbidden")
    return readable


def kickoff_params(request: Request, body: dict | None) -> Params:
    """The kick-off's parameters: the query of a GET, the Parameters resource of a POST (Bulk Data v2)."""
    if body is None:
        return list(request.query_params.multi_items())
    if body.get("resourceType") != "Parameters":
        raise FhirHttpError(400, "a POST $export takes a Parameters resource")
    params: Params = []
    for parameter in body.get("parameter", []):
        values = [v for k, v in parameter.items() if k.startswith("value")]
        if not isinstance(parameter.get("name"), str) or len(values) != 1 or not isinstance(values[0], str):
            raise FhirHttpError(400, "each $export parameter needs a name and one primitive value[x]")
        params.append((parameter["name"], values[0]))
    return params


async def kickoff(call: Call, request: Request, level: Level, group: str | None = None,
                  body: dict | None = None) -> Response:
    job = _job(call, request, level, group, kickoff_params(request, body))
    if group is not None:
        try:
            await call.store.read_async(call.ctx, "Group", check_id(group))
        except StoreError as exc:
            raise FhirHttpError(exc.status, f"Group/{group}: {exc}", code=exc.code) from exc
    jobs = jobs_of(request)
    refused = await run_in_threadpool(refusal, jobs, quota_of(request), job.session, job.token)
    if refused is not None:
        raise FhirHttpError(429, refused.reason, code="throttled",
                            headers={"Retry-After": str(refused.retry_after_s)})
    await run_in_threadpool(jobs.create, job)
    writer = {"check_disk": disk_check(jobs, quota_of(request))}  # the cap, again while writing
    threading.Thread(target=run_export, args=(call.store, call.ctx, jobs, job, served_types()), kwargs=writer,
                     daemon=True, name=f"export-{job.id}").start()
    return Response(status_code=202, headers={"Content-Location": _status_url(call, job.id)})


def _status_url(call: Call, job_id: str) -> str:
    return f"{call.base}/$export-poll-status?{urlencode({'_jobId': job_id})}"


def _owned(call: Call, request: Request) -> ExportJob:
    job_id = request.query_params.get("_jobId", "")
    sweep(jobs_of(request), quota_of(request))  # an expired job answers 404 like a cancelled one
    job = jobs_of(request).load(job_id)
    if job is None or job.session != call.ctx.session_id:
        raise FhirHttpError(404, f"no export job {job_id[:40]!r} on this base", code="not-found")
    return job


async def status(call: Call, request: Request) -> Response:
    job = await run_in_threadpool(_owned, call, request)
    if job.state == "in-progress":
        return Response(status_code=202, headers={"X-Progress": job.progress, "Retry-After": "1"})
    expires = {"Expires": _expires(job, request)}
    if job.state == "failed":
        raise FhirHttpError(500, "the export failed: " + "; ".join(job.error), code="exception")
    files = f"{call.base}/$export-file/{job.id}"
    manifest = {
        "transactionTime": job.transaction_time, "request": job.request,
        "requiresAccessToken": bool(request.app.state.settings.auth),
        "output": [{"type": o["type"], "url": f"{files}/{o['file']}", "count": o["count"]}
                   for o in job.output],
        "error": [{"type": "OperationOutcome", "url": f"{files}/{ERRORS}"}] if job.issues else [],
    }
    return Response(orjson.dumps(manifest), media_type="application/json", headers=expires)


def _expires(job: ExportJob, request: Request) -> str:
    """When the job and its files are swept (quota.py: its kick-off + ROUNDS_EXPORT_EXPIRY_HOURS), as an
    HTTP date (Bulk Data v2: the complete status SHOULD say it)."""
    kicked = datetime.fromisoformat(job.transaction_time.replace("Z", "+00:00"))
    return format_datetime(kicked + timedelta(hours=request.app.state.settings.export_expiry_hours),
                           usegmt=True)


async def cancel(call: Call, request: Request) -> Response:
    job = await run_in_threadpool(_owned, call, request)
    await run_in_threadpool(jobs_of(request).cancel, job.id)
    return Response(status_code=202)


async def file(call: Call, request: Request, job_id: str, name: str) -> Response:
    jobs = jobs_of(request)
    job = await run_in_threadpool(jobs.load, job_id)
    path = jobs.file(job_id, name) if job is not None and job.session == call.ctx.session_id else None
    if path is None or job.state != "completed":
        raise FhirHttpError(404, f"no export file {name[:80]!r} in job {job_id[:40]!r}", code="not-found")
    return FileResponse(path, media_type="application/fhir+ndjson")
