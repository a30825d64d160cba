"""Attacks on `$export` (issue 38, item 8): many whole-sandbox jobs from one token or on one base, filling
the disk, and finished jobs kept forever. Every attempt is counted (ATTEMPTS, printed with -s); each must be
refused with 429 and `Retry-After`, and expired jobs must be gone, on both backends."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import orjson
import pytest

from rounds.migrate import upgrade
from rounds.settings import Settings
from services.fhir_api.app import create_app
from services.fhir_api.bulk.jobs import ExportJob, JobStore
from services.fhir_api.bulk.quota import ExportQuota, refusal, sweep, token_key
from tests.fhir_api.conftest import LiveApi, observation, patient, start_live
from tests.wiring import store_on

ASYNC = {"Prefer": "respond-async", "Accept": "application/fhir+json"}
ATTEMPTS: Counter[str] = Counter()
EXPIRY_H = 1.0


@pytest.fixture
def quota_api(database_url: str, tmp_path: Path) -> Iterator[tuple[LiveApi, JobStore]]:
    upgrade(database_url)
    store = store_on(database_url)
    settings = Settings(database_url=database_url, bulk_dir=str(tmp_path / "jobs"), export_jobs_per_token=1,
                        export_jobs_per_session=2, export_expiry_hours=EXPIRY_H, export_disk_bytes=64 * 1024)
    api, server, thread = start_live(create_app(settings, store), store)
    httpx.post(f"{api.fhir}/Patient", json=patient("quota"))
    yield api, JobStore(tmp_path / "jobs")
    server.should_exit = True
    thread.join(timeout=10)


def _running(jobs: JobStore, session: str | None, token: str, age_h: float = 0.0, state: str = "in-progress",
             payload: bytes = b"") -> ExportJob:
    """A job as the writer leaves it on disk (in progress: as if its writer were still paging)."""
    started = (datetime.now(UTC) - timedelta(hours=age_h)).isoformat()
    job = ExportJob("system", "x", started, session, token=token, state=state)  # type: ignore[arg-type]
    jobs.create(job)
    if payload:
        (jobs.folder(job.id) / "Patient.ndjson").write_bytes(payload)
        job.output = [{"type": "Patient", "file": "Patient.ndjson", "count": 1}]
        (jobs.folder(job.id) / "job.json").write_bytes(orjson.dumps(asdict(job)))
    return job


def _kick(base: str, token: str | None = None) -> httpx.Response:
    headers = {**ASYNC, **({"Authorization": f"Bearer {token}"} if token else {})}
    return httpx.get(f"{base}/$export", headers=headers, timeout=30)


def _refused(answer: httpx.Response) -> None:
    assert answer.status_code == 429, answer.text
    assert int(answer.headers["retry-after"]) >= 1
    assert answer.json()["resourceType"] == "OperationOutcome"


def test_jobs_per_token_and_per_base_are_limited(quota_api):
    api, jobs = quota_api
    _running(jobs, None, token_key("Bearer alice"))
    for _ in range(3):  # alice again, on any base
        ATTEMPTS["$export: jobs per token"] += 1
        _refused(_kick(api.fhir, "alice"))
    session = httpx.post(f"{api.root}/sessions", json={}).json()
    ATTEMPTS["$export: jobs per token"] += 1
    _refused(_kick(session["fhirBase"], "alice"))
    _running(jobs, None, token_key("Bearer bob"))  # the shared record now has two in progress
    for stranger in ("carol", "dave", None):
        ATTEMPTS["$export: jobs per base"] += 1
        _refused(_kick(api.fhir, stranger))
    own = _kick(session["fhirBase"], "erin")  # another base, another token: not held back
    assert own.status_code == 202, own.text


def test_the_disk_cap_refuses_new_jobs_until_files_expire(quota_api):
    api, jobs = quota_api
    _running(jobs, "elsewhere", "someone", age_h=EXPIRY_H / 2, state="completed", payload=b"x" * 70_000)
    for token in ("alice", "bob"):
        ATTEMPTS["$export: disk cap"] += 1
        answer = _kick(api.fhir, token)
        _refused(answer)
        assert int(answer.headers["retry-after"]) <= EXPIRY_H * 3600 / 2 + 2  # when the files go


def _finished(status_url: str) -> httpx.Response:
    deadline = time.monotonic() + 60
    while (answer := httpx.get(status_url)).status_code == 202:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return answer


def test_a_job_that_crosses_the_disk_cap_while_writing_stops_and_others_go_on(quota_api):
    """The kick-off finds the disk under the cap; the job's own pages carry it over: that job fails with an
    OperationOutcome and its files removed; a finished job of another base keeps its files, and a job
    kicked off afterwards runs to the end."""
    api, jobs = quota_api
    other = _running(jobs, "elsewhere", "someone", state="completed", payload=b"x" * 20_000)
    pid = httpx.post(f"{api.fhir}/Patient", json=patient("big")).json()["id"]
    bulk = [{"request": {"method": "POST", "url": "Observation"},
             "resource": observation(pid, f"disk-{n}", "2150-01-01T00:00:00Z")} for n in range(300)]
    assert httpx.post(api.fhir, json={"resourceType": "Bundle", "type": "transaction", "entry": bulk},
                      timeout=120).status_code == 200
    for token in ("alice", "bob"):  # each crosses the cap in its own first page of Observations
        kick = _kick(api.fhir, token)
        assert kick.status_code == 202, kick.text
        ATTEMPTS["$export: disk cap while writing"] += 1
        failed = _finished(kick.headers["content-location"])
        assert failed.status_code == 500, failed.text
        outcome = failed.json()
        assert outcome["resourceType"] == "OperationOutcome" and "disk quota" in failed.text, outcome
        job_id = kick.headers["content-location"].rsplit("=", 1)[-1]
        assert list(jobs.folder(job_id).glob("*.ndjson")) == []  # its files are gone
    assert (jobs.folder(other.id) / "Patient.ndjson").stat().st_size == 20_000  # the other job untouched
    small = httpx.get(f"{api.fhir}/$export", params={"_type": "Patient"}, headers=ASYNC)
    assert small.status_code == 202, small.text
    assert _finished(small.headers["content-location"]).status_code == 200


def test_expired_jobs_and_their_files_are_deleted(quota_api):
    api, jobs = quota_api
    old = _running(jobs, None, "anonymous", age_h=EXPIRY_H + 0.1, state="completed", payload=b"{}\n")
    stuck = _running(jobs, None, "anonymous", age_h=EXPIRY_H + 0.1)  # a writer that died
    ATTEMPTS["$export: expired job read"] += 1
    poll = httpx.get(f"{api.fhir}/$export-poll-status", params={"_jobId": old.id})
    assert poll.status_code == 404
    assert not jobs.folder(old.id).exists() and not jobs.folder(stuck.id).exists()
    kick = _kick(api.fhir)  # the dead job no longer counts against the base
    assert kick.status_code == 202, kick.text
    status = kick.headers["content-location"]
    deadline = time.monotonic() + 30
    while httpx.get(status).status_code == 202:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert httpx.get(status).status_code == 200


def test_the_quota_rules_directly(tmp_path: Path):
    jobs, quota = JobStore(tmp_path), ExportQuota(jobs_per_token=2, jobs_per_session=3, expiry_s=60,
                                                  disk_bytes=100_000)
    assert token_key(None) == token_key("Basic abc") == "anonymous" and token_key("Bearer t") != "anonymous"
    assert token_key("Bearer t") == token_key("bearer  t") != token_key("Bearer u")  # the token, not a label
    _running(jobs, "s1", "a")
    assert refusal(jobs, quota, "s1", "a") is None
    _running(jobs, "s2", "a")
    assert "token" in refusal(jobs, quota, "s3", "a").reason  # type: ignore[union-attr]
    _running(jobs, "s1", "b")
    _running(jobs, "s1", "c")
    assert "base" in refusal(jobs, quota, "s1", "d").reason  # type: ignore[union-attr]
    assert refusal(jobs, quota, "s9", "d") is None
    _running(jobs, "s9", "e", state="completed", payload=b"x" * 100_000)
    assert "disk" in refusal(jobs, quota, "s8", "f").reason  # type: ignore[union-attr]
    (tmp_path / ".cancelled-x").mkdir()
    assert len(sweep(jobs, quota, now=time.time() + 61)) == 0  # every one expired
    assert list(tmp_path.iterdir()) == []


def test_zz_attempts_counted(capsys):
    with capsys.disabled():
        print("\n$export attack attempts:", dict(ATTEMPTS))
