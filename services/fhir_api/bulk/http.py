"""The HTTP side of `$export`: kick-off, status polling, cancel and the files (Bulk Data Access v2).

- Kick-off: `GET <base>/$export`, `<base>/Patient/$export`, `<base>/Group/<id>/$export` with
  `Prefer: respond-async` → 202, `Content-Location: <base>/$export-poll-status?_jobId=<id>`; the writer runs
  in a thread of this process (export.py). `_type`, `_since`, `_outputFormat` (NDJSON only); anything else
  the spec defines (`_typeFilter`, `_elements`, `includeAssociatedData`) → 400, never silently ignored.
- Status: 202 with `X-Progress` and `Retry-After` while writing; 200 with the manifest when complete; a failed
  job 500 with an OperationOutcome. `DELETE` on the same URL cancels and removes the files (202), then 404.
- Files: `<base>/$export-file/<id>/<Type>.ndjson` (`application/fhir+ndjson`), streamed from disk.

A job answers only on the base it was asked on (a session's export is not visible from `/fhir` or another
session); access control applies as to any operation on that base.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from urllib.parse import urlencode

import orjson
from fastapi import Request, Response
from fastapi.responses import FileResponse
from starlette.concurrency import run_in_threadpool

from services.fhir_api.bulk.export import run_export
from services.fhir_api.bulk.jobs import ExportJob, JobStore, Level
from services.fhir_api.bulk.quota import ExportQuota, disk_check, refusal, sweep, token_key
from services.fhir_api.http.errors import FhirHttpError
from services.fhir_api.http.outcome import Call
from services.fhir_api.http.params import check_id, parse_instant
from services.fhir_api.http.validation import served_types
from services.fhir_api.store.interface import StoreError
from services.fhir_api.store.rows import instant

FORMATS = frozenset({"application/fhir+ndjson", "application/ndjson", "ndjson"})
KNOWN = frozenset({"_type", "_since", "_outputFormat", "_format"})


def jobs_of(request: Request) -> JobStore:
    return JobStore(request.app.state.settings.bulk_dir)


def quota_of(request: Request) -> ExportQuota:
    s = request.app.state.settings
    return ExportQuota(s.export_jobs_per_token, s.export_jobs_per_session, s.export_expiry_hours * 3600,
                       s.export_disk_bytes)


def _job(call: Call, request: Request, level: Level, group: str | None) -> ExportJob:
    if "respond-async" not in request.headers.get("prefer", ""):
        raise FhirHttpError(400, "$export is asynchronous: send 'Prefer: respond-async'")
    params = request.query_params
    unknown = sorted(set(params) - KNOWN)
    if unknown:
        raise FhirHttpError(400, f"$export does not support {', '.join(unknown)}", code="not-supported")
    if params.get("_outputFormat", "application/fhir+ndjson") not in FORMATS:
        raise FhirHttpError(400, "_outputFormat: only application/fhir+ndjson is written")
    types = [t for value in params.getlist("_type") for t in value.split(",") if t] or None
    bad = sorted(set(types or ()) - served_types())
    if bad:
        raise FhirHttpError(400, f"_type: unknown resource types {', '.join(bad)}")
    since = params.get("_since")
    if since is not None:
        since = instant(parse_instant(since, "_since"))
    return ExportJob(level, str(request.url), instant(datetime.now(UTC)), call.ctx.session_id, group, types,
                     since, token=token_key(request.headers.get("authorization")))


async def kickoff(call: Call, request: Request, level: Level, group: str | None = None) -> Response:
    job = _job(call, request, level, group)
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
    if job.state == "failed":
        raise FhirHttpError(500, "the export failed: " + "; ".join(job.error), code="exception")
    files = f"{call.base}/$export-file/{job.id}"
    manifest = {
        "transactionTime": job.transaction_time, "request": job.request,
        "requiresAccessToken": bool(request.app.state.settings.auth),
        "output": [{"type": o["type"], "url": f"{files}/{o['file']}", "count": o["count"]}
                   for o in job.output],
        "error": [],
    }
    return Response(orjson.dumps(manifest), media_type="application/json")


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
