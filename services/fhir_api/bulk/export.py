"""The writer of an export job: every matching resource of the base's view, streamed page by page into one
NDJSON file per type.

Nothing is held in memory beyond one page: each type is walked with the store's own keyset-paged search
(pinned to one change-sequence snapshot, so a write meanwhile does not shift pages), on the context of the
base (a session: its copy-on-write view at its clock, with its as-of views, exactly what its searches
answer). Patient- and Group-level exports walk each type of the Patient compartment narrowed to batches of
the patients (the compartment's own parameter, `auth/compartment.py`); a resource referring to patients of
two batches would be written twice (none does in MIMIC-IV on FHIR).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import parse_qsl

import orjson

from services.fhir_api.auth.compartment import narrowing_param
from services.fhir_api.bulk.elements import subset_for
from services.fhir_api.bulk.jobs import ExportJob, JobStore
from services.fhir_api.bulk.quota import DiskCapReached
from services.fhir_api.http.summary import Subset
from services.fhir_api.search.registry import patient_compartment
from services.fhir_api.store.cursor import pages
from services.fhir_api.store.interface import Context, ResourceStore, StoredResource
from services.fhir_api.withheld import served

PAGE = 1000  # resources per search page
PATIENT_BATCH = 50  # patients ORed into one compartment parameter
ERRORS = "Errors.ndjson"  # the manifest's `error` file (no resource type has that name)


class Cancelled(Exception):
    """The job's folder is gone (DELETE): stop writing."""


def level_types(job: ExportJob, served: frozenset[str]) -> list[str]:
    """The types the export covers: `_type`, within the Patient compartment at patient / group level."""
    if job.level == "system":
        every = sorted(served)
    else:
        every = ["Patient", *sorted(t for t in patient_compartment() if t != "Patient")]
    return [t for t in every if job.types is None or t in job.types]


def patient_batches(store: ResourceStore, ctx: Context, job: ExportJob) -> Iterator[list[str]]:
    """The export's patients, PATIENT_BATCH at a time: every Patient, or the Group's Patient members."""
    if job.level == "group":
        group = orjson.loads(store.read(ctx, "Group", job.group or "").raw)
        ids = [m["entity"]["reference"].removeprefix("Patient/") for m in group.get("member", [])
               if m.get("entity", {}).get("reference", "").startswith("Patient/") and not m.get("inactive")]
        for at in range(0, len(ids), PATIENT_BATCH):
            yield ids[at:at + PATIENT_BATCH]
        return
    batch: list[str] = []
    for page in pages(store, ctx, "Patient", [], PAGE):
        for stored in page:
            batch.append(stored.id)
            if len(batch) == PATIENT_BATCH:
                yield batch
                batch = []
    if batch:
        yield batch


def _line(stored: StoredResource, subset: Subset | None) -> bytes:
    raw = served(stored)
    if subset is not None:
        raw = subset.apply(raw)
    return (orjson.dumps(orjson.loads(raw)) if b"\n" in raw else raw) + b"\n"


def _lines(page: list[StoredResource], subset: Subset | None, job: ExportJob) -> tuple[bytes, int]:
    """A page's NDJSON and how many lines; a resource that cannot be written (its stored JSON unreadable)
    is left out and named in the job's issues (the error file), and the export goes on."""
    out: list[bytes] = []
    for stored in page:
        try:
            out.append(_line(stored, subset))
        except (ValueError, TypeError) as exc:  # orjson's errors are ValueErrors
            job.issues.append(f"{stored.resource_type}/{stored.id} could not be exported: "
                              f"{type(exc).__name__}")
    return b"".join(out), len(out)


def outcome_line(message: str) -> bytes:
    """One line of the error file: an OperationOutcome (Bulk Data IG: the `error` array's files)."""
    return orjson.dumps({"resourceType": "OperationOutcome", "issue": [
        {"severity": "error", "code": "processing", "diagnostics": message}]}) + b"\n"


def searches(store: ResourceStore, ctx: Context, job: ExportJob, resource_type: str
             ) -> Iterator[list[tuple[str, str]]]:
    """The search parameters whose matches together are the type's part of the export: each of the type's
    `_typeFilter` queries (ORed) ANDed with `_since` and, at patient / group level, the patients."""
    since = [("_lastUpdated", f"ge{job.since}")] if job.since else []
    filters = [parse_qsl(q) for q in job.type_filters.get(resource_type, [])] or [[]]
    if job.level == "system":
        for extra in filters:
            yield [*since, *extra]
        return
    name = narrowing_param(resource_type)
    for batch in patient_batches(store, ctx, job):
        values = batch if name == "_id" else [f"Patient/{p}" for p in batch]
        for extra in filters:
            yield [(name, ",".join(values)), *since, *extra]


def run_export(store: ResourceStore, ctx: Context, jobs: JobStore, job: ExportJob, served: frozenset[str],
               on_page: Callable[[], None] | None = None, check_disk: Callable[[], None] | None = None
               ) -> None:
    """Write the job's files and complete it; a failure of the store fails it (its error kept in the
    manifest's place); a cancellation just stops. `check_disk` (quota.disk_check) is asked after each page
    is on disk: when it raises, the job fails with its message and its files are removed."""
    folder = jobs.folder(job.id)
    try:
        for resource_type in level_types(job, served):
            path, count = folder / f"{resource_type}.ndjson", 0
            job.progress = f"exporting {resource_type}"
            jobs.save(job)
            # two filters of a type may match one resource: written once (its id remembered)
            seen: set[str] | None = set() if len(job.type_filters.get(resource_type, [])) > 1 else None
            subset = subset_for(job.elements, resource_type)
            with _output(path) as out:
                for params in searches(store, ctx, job, resource_type):
                    for page in pages(store, ctx, resource_type, params, PAGE):
                        if not folder.is_dir():
                            raise Cancelled
                        if seen is not None:
                            page = [r for r in page if r.id not in seen]
                            seen.update(r.id for r in page)
                        lines, written = _lines(page, subset, job)
                        out.write(lines)
                        count += written
                        if check_disk is not None:
                            out.flush()
                            check_disk()
                        if on_page is not None:
                            on_page()
            if count:
                job.output.append({"type": resource_type, "file": path.name, "count": count})
            else:
                path.unlink(missing_ok=True)
        if job.issues:
            (folder / ERRORS).write_bytes(b"".join(outcome_line(m) for m in job.issues))
        job.state, job.progress = "completed", "completed"
        jobs.save(job)
    except (Cancelled, FileNotFoundError):
        return
    except Exception as exc:  # noqa: BLE001 - the job reports it; the server stays up
        if folder.is_dir():
            if isinstance(exc, DiskCapReached):  # free the disk for the jobs that stayed under the cap
                for written in folder.glob("*.ndjson"):
                    written.unlink(missing_ok=True)
                job.output = []
            job.state, job.progress = "failed", "failed"
            job.error.append(f"{type(exc).__name__}: {exc}")
            jobs.save(job)


def _output(path: Path):
    return path.open("wb", buffering=1 << 20)
