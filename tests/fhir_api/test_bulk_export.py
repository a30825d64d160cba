"""Bulk Data $export over HTTP: kick-off, polling, the NDJSON files, levels, _type / _since, sessions at their
clock, cancel, and the refusals (all OperationOutcomes)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from rounds.migrate import upgrade
from rounds.settings import Settings
from services.fhir_api.app import create_app
from services.fhir_api.bulk import export
from services.fhir_api.bulk.jobs import ExportJob, JobStore
from services.fhir_api.http.validation import served_types
from services.fhir_api.store.interface import Context
from tests.fhir_api.conftest import LiveApi, assert_outcome, observation, patient, start_live
from tests.wiring import store_on

ASYNC = {"Prefer": "respond-async", "Accept": "application/fhir+json"}


@pytest.fixture(scope="module")
def bulk_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveApi]:
    work = tmp_path_factory.mktemp("bulk")
    url = f"sqlite:///{work / 'bulk.sqlite'}"
    upgrade(url)
    store = store_on(url)
    settings = Settings(database_url=url, bulk_dir=str(work / "jobs"))
    api, server, thread = start_live(create_app(settings, store), store)
    yield api
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def record(bulk_api: LiveApi) -> dict:
    ids: dict = {}
    with httpx.Client(base_url=bulk_api.fhir) as c:
        for name in ("a", "b"):
            p = c.post("/Patient", json=patient(f"bulk-{name}")).json()
            early = c.post("/Observation", json=observation(p["id"], f"bulk-{name}", "2150-01-01T00:00:00Z"))
            late = c.post("/Observation", json=observation(p["id"], f"bulk-{name}", "2190-01-01T00:00:00Z"))
            ids[name], ids[f"early_{name}"] = p["id"], early.json()["id"]
            ids[f"late_{name}"] = late.json()["id"]
        org = c.post("/Organization", json={"resourceType": "Organization", "name": "bulk"})
        ids["org"] = org.json()["id"]
        ids["group"] = c.post("/Group", json={"resourceType": "Group", "type": "person", "actual": True,
                                              "member": [{"entity": {"reference": f"Patient/{ids['b']}"}}]}
                              ).json()["id"]
    return ids


def run(base: str, path: str = "$export", **params) -> tuple[dict, dict[str, list[dict]]]:
    """Kick off, poll until complete, download: (manifest, resources by type)."""
    kick = httpx.get(f"{base}/{path}", params=params, headers=ASYNC)
    assert kick.status_code == 202, kick.text
    status = kick.headers["content-location"]
    deadline = time.monotonic() + 30
    while (answer := httpx.get(status)).status_code == 202:
        assert answer.headers["x-progress"] and answer.headers["retry-after"] == "1"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert answer.status_code == 200, answer.text
    manifest = answer.json()
    files = {}
    for item in manifest["output"]:
        got = httpx.get(item["url"])
        assert got.status_code == 200 and got.headers["content-type"].startswith("application/fhir+ndjson")
        files[item["type"]] = [orjson.loads(line) for line in got.content.splitlines()]
        assert len(files[item["type"]]) == item["count"]
    return manifest, files


def ids_of(files: dict, rtype: str) -> set[str]:
    return {r["id"] for r in files.get(rtype, [])}


@pytest.mark.slow  # a search per served type (about 140)
def test_system_export_writes_every_resource_once_per_type(bulk_api, record):
    manifest, files = run(bulk_api.fhir)
    assert manifest["requiresAccessToken"] is False and manifest["request"].endswith("/fhir/$export")
    assert ids_of(files, "Patient") >= {record["a"], record["b"]}
    assert ids_of(files, "Observation") >= {record[k] for k in ("early_a", "late_a", "early_b", "late_b")}
    assert record["org"] in ids_of(files, "Organization")
    stored = httpx.get(f"{bulk_api.fhir}/Patient/{record['a']}").json()
    assert next(r for r in files["Patient"] if r["id"] == record["a"]) == stored
    _, only = run(bulk_api.fhir, _type="Organization,Group")
    assert set(only) == {"Organization", "Group"}


def test_since_keeps_what_changed_after(bulk_api, record):
    mark = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() + 1)) + "Z"
    time.sleep(1.1)  # _since is an instant to the second here: the mark is after every earlier write
    fresh = httpx.post(f"{bulk_api.fhir}/Organization", json={"resourceType": "Organization", "name": "new"})
    _, files = run(bulk_api.fhir, _since=mark, _type="Organization,Patient")
    assert ids_of(files, "Organization") == {fresh.json()["id"]} and "Patient" not in files


def test_patient_and_group_levels_are_the_compartments(bulk_api, record):
    _, files = run(bulk_api.fhir, "Patient/$export")
    assert "Organization" not in files and ids_of(files, "Patient") >= {record["a"], record["b"]}
    _, group = run(bulk_api.fhir, f"Group/{record['group']}/$export", _type="Patient,Observation")
    assert ids_of(group, "Patient") == {record["b"]}
    assert ids_of(group, "Observation") == {record["early_b"], record["late_b"]}


def test_a_session_exports_its_view_at_its_clock(bulk_api, record):
    session = httpx.post(f"{bulk_api.root}/sessions", json={"now": "2160-01-01T00:00:00Z"}).json()
    base = session["fhirBase"]
    own = httpx.post(f"{base}/Observation", json=observation(record["a"], "mine", "2155-01-01T00:00:00Z"))
    manifest, files = run(base, "Patient/$export", _type="Observation")
    seen = ids_of(files, "Observation")
    assert {record["early_a"], record["early_b"], own.json()["id"]} <= seen
    assert not seen & {record["late_a"], record["late_b"]}  # after the clock
    job = manifest["output"][0]["url"].split("/$export-file/")[1].split("/")[0]
    assert_outcome(httpx.get(f"{bulk_api.fhir}/$export-poll-status", params={"_jobId": job}), 404)
    _, shared = run(bulk_api.fhir, _type="Observation")
    assert own.json()["id"] not in ids_of(shared, "Observation")


def test_cancel_removes_the_job(bulk_api, record):
    kick = httpx.get(f"{bulk_api.fhir}/$export", headers=ASYNC)
    status = kick.headers["content-location"]
    assert httpx.delete(status).status_code == 202
    assert_outcome(httpx.get(status), 404)
    assert_outcome(httpx.delete(status), 404)


def test_refusals(bulk_api, record):
    fhir = bulk_api.fhir
    assert_outcome(httpx.get(f"{fhir}/$export"), 400)  # no Prefer: respond-async
    for params in ({"_type": "Nope"}, {"_typeFilter": "Observation?nonsense=x"}, {"_since": "yesterday"},
                   {"_outputFormat": "text/csv"}, {"_elements": "Nope.id"}, {"_typeFilter": "Observation"},
                   {"_type": "Patient", "_typeFilter": "Observation?code=x"}):
        assert_outcome(httpx.get(f"{fhir}/$export", params=params, headers=ASYNC), 400)
    assert_outcome(httpx.get(f"{fhir}/Group/missing/$export", headers=ASYNC), 404)
    assert_outcome(httpx.get(f"{fhir}/Observation/$export", headers=ASYNC), 404)
    assert_outcome(httpx.get(f"{fhir}/Patient/{record['a']}/$export", headers=ASYNC), 404)
    assert_outcome(httpx.get(f"{fhir}/$export-poll-status", params={"_jobId": "../../etc"}), 404)
    assert_outcome(httpx.get(f"{fhir}/$export-file/{'0' * 32}/Patient.ndjson"), 404)
    manifest, _ = run(fhir, _type="Organization")
    url = manifest["output"][0]["url"]
    assert_outcome(httpx.get(url.replace("Organization.ndjson", "..%2Fjob.json")), 404)


def test_the_writer_stops_when_the_job_is_cancelled(tmp_path: Path, record, bulk_api, monkeypatch):
    monkeypatch.setattr(export, "PAGE", 1)  # a page per resource: the cancel lands mid-type
    jobs = JobStore(tmp_path)
    job = ExportJob("system", "x", "2020-01-01T00:00:00Z", types=["Observation"])
    jobs.create(job)
    pages: list[int] = []

    def cancel_after_two() -> None:
        pages.append(1)
        if len(pages) == 2:
            jobs.cancel(job.id)

    export.run_export(bulk_api.store, Context(), jobs, job, served_types(), on_page=cancel_after_two)
    assert len(pages) == 2 and not jobs.folder(job.id).exists() and jobs.load(job.id) is None


def test_a_store_failure_fails_the_job(tmp_path: Path, bulk_api, monkeypatch):
    jobs = JobStore(tmp_path)
    job = ExportJob("system", "x", "2020-01-01T00:00:00Z", types=["Patient"])
    jobs.create(job)

    class Broken:
        def search(self, ctx, request):
            raise RuntimeError("database went away")

    export.run_export(Broken(), Context(), jobs, job, served_types())
    failed = jobs.load(job.id)
    assert failed.state == "failed" and "database went away" in failed.error[0]


def test_the_capability_statement_names_the_export_operations(bulk_api):
    doc = httpx.get(f"{bulk_api.fhir}/metadata").json()
    assert doc["instantiates"] == ["http://hl7.org/fhir/uv/bulkdata/CapabilityStatement/bulk-data"]
    rest = doc["rest"][0]
    assert "export" in {op["name"] for op in rest["operation"]}
    by_type = {r["type"]: {op["name"] for op in r.get("operation", [])} for r in rest["resource"]}
    assert by_type["Patient"] == {"everything", "export"} and by_type["Group"] == {"export"}


def test_a_session_export_file_is_streamed_not_recorded_while_kickoff_and_polls_are():
    from services.fhir_api.backbone.recorder import InteractionRecorder

    base = "/sessions/s1/fhir"
    assert not InteractionRecorder.wants("GET", f"{base}/$export-file/{'a' * 32}/Observation.ndjson")
    assert InteractionRecorder.wants("GET", f"{base}/Patient/$export")
    assert InteractionRecorder.wants("GET", f"{base}/$export-poll-status")
    assert InteractionRecorder.wants("GET", f"{base}/Observation/o1")


def test_post_kickoff_type_filter_ndjson_accept_and_expires(bulk_api, record):
    """Bulk Data v2: a POST kick-off with a Parameters body, `_typeFilter` ORed per type and ANDed with the
    level's patients, files downloaded with `Accept: application/fhir+ndjson`, `Expires` on completion."""
    body = {"resourceType": "Parameters", "parameter": [
        {"name": "_type", "valueString": "Patient,Observation"},
        {"name": "_typeFilter", "valueString": "Observation?code=bulk-a%2Cnothing"},
        {"name": "_typeFilter", "valueString": "Observation?date=ge2189-01-01"}]}
    kick = httpx.post(f"{bulk_api.fhir}/Patient/$export", json=body, headers=ASYNC)
    assert kick.status_code == 202, kick.text
    deadline = time.monotonic() + 30
    while (answer := httpx.get(kick.headers["content-location"])).status_code == 202:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert answer.status_code == 200 and "GMT" in answer.headers["expires"]
    files = {}
    for item in answer.json()["output"]:
        for accept in ("application/fhir+ndjson", "*/*", None):
            got = httpx.get(item["url"], headers={"Accept": accept} if accept else {})
            assert got.status_code == 200, (accept, got.text)
        files[item["type"]] = [orjson.loads(line) for line in got.content.splitlines()]
    # a's two labs by code, b's late one by date; a's late one matches both filters: written once
    assert ids_of(files, "Observation") == {record["early_a"], record["late_a"], record["late_b"]}
    assert len(files["Observation"]) == 3 and ids_of(files, "Patient") >= {record["a"], record["b"]}
    bad = httpx.post(f"{bulk_api.fhir}/$export", json={"resourceType": "Patient"}, headers=ASYNC)
    assert_outcome(bad, 400)
