"""`$export` quotas: how many jobs one token and one base may have in progress, how long a job and its files
live, and how much disk all jobs' files may take (issue 38: six whole-sandbox jobs from one token wrote
295 MB in 5 s, and finished jobs were never removed).

Checked at each kick-off, after the sweep that deletes expired jobs (finished or not) and leftovers of
cancelled ones; a refusal is 429 with `Retry-After` (seconds: until an expiry frees the disk, else a short
wait for a job in progress to finish). The disk cap is checked again while a job writes (`disk_check`, after
each page): a job whose files carry the total over it stops with its error. The token is kept as a digest
in `job.json`, never the token itself.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from services.fhir_api.bulk.jobs import ExportJob, JobStore

BUSY_RETRY_S = 10  # Retry-After when a job limit is reached: jobs of the demo take seconds


@dataclass(frozen=True)
class ExportQuota:
    jobs_per_token: int = 2
    jobs_per_session: int = 2
    expiry_s: float = 24 * 3600.0
    disk_bytes: int = 2 * 1024**3


@dataclass(frozen=True)
class Refusal:
    reason: str
    retry_after_s: int


def token_key(authorization: str | None) -> str:
    """Whose job it is: a digest of the bearer token ('anonymous' without one: auth off)."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return "anonymous"
    return hashlib.sha256(token.strip().encode()).hexdigest()[:32]


def _age_s(job: ExportJob, now: float) -> float:
    return now - datetime.fromisoformat(job.transaction_time.replace("Z", "+00:00")).timestamp()


def _size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.iterdir() if f.is_file())


def sweep(jobs: JobStore, quota: ExportQuota, now: float | None = None) -> list[ExportJob]:
    """Delete expired jobs and cancelled leftovers; the jobs that remain."""
    now = time.time() if now is None else now
    if not jobs.root.is_dir():
        return []
    kept = []
    for folder in jobs.root.iterdir():
        if folder.name.startswith(".cancelled-"):
            shutil.rmtree(folder, ignore_errors=True)
            continue
        job = jobs.load(folder.name)
        if job is None:
            continue
        if _age_s(job, now) >= quota.expiry_s:
            jobs.cancel(job.id)
        else:
            kept.append(job)
    return kept


class DiskCapReached(Exception):
    """All jobs' files passed the disk cap while this job was writing: it stops (export.py)."""


def disk_check(jobs: JobStore, quota: ExportQuota) -> Callable[[], None]:
    """What the writer calls after each page it flushed: DiskCapReached once all jobs' files (its own
    included) take more than the cap. The job that crosses it is the one that stops; its files are then
    removed (export.py), so the jobs that were under the cap go on."""

    def check() -> None:
        used = sum(_size(folder) for folder in jobs.root.iterdir() if folder.is_dir())
        if used > quota.disk_bytes:
            raise DiskCapReached(f"the export disk quota ({quota.disk_bytes} bytes for all jobs) was "
                                 "reached while writing; this job stopped and its files were removed")

    return check


def refusal(jobs: JobStore, quota: ExportQuota, session: str | None, token: str) -> Refusal | None:
    """Why a new job of `token` on the base `session` may not start now (None: it may)."""
    now = time.time()
    live = sweep(jobs, quota, now)
    running = [j for j in live if j.state == "in-progress"]
    if sum(j.token == token for j in running) >= quota.jobs_per_token:
        return Refusal(f"this token has {quota.jobs_per_token} export jobs in progress", BUSY_RETRY_S)
    if sum(j.session == session for j in running) >= quota.jobs_per_session:
        return Refusal(f"this base has {quota.jobs_per_session} export jobs in progress", BUSY_RETRY_S)
    used = sum(_size(jobs.folder(j.id)) for j in live if jobs.folder(j.id).is_dir())
    if used >= quota.disk_bytes:
        first = min((quota.expiry_s - _age_s(j, now) for j in live), default=BUSY_RETRY_S)
        return Refusal("the export disk quota is used up; files are deleted as jobs expire",
                       max(1, int(first) + 1))
    return None
