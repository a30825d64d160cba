"""Bulk Data `_elements` (per type, SUBSETTED as search's `_elements`) and the error file of the Bulk Data IG:
with `Prefer: handling=lenient` a type that cannot be exported, and a resource that cannot be written, are
named in the manifest's `error` file (OperationOutcome NDJSON) while the rest is exported. Driven by httpx:
smart-fetch 1.0.3 sends neither `_elements` nor `handling=lenient` (it downloads and reports the error files,
which test_smart_fetch.py's export has none of)."""

from __future__ import annotations

import time

import httpx
import orjson
from sqlalchemy import update

from services.fhir_api.store.models import version
from tests.fhir_api.conftest import assert_outcome
from tests.fhir_api.test_bulk_export import ASYNC, bulk_api, record, run  # noqa: F401 - fixtures

SUBSETTED = "SUBSETTED"
LENIENT = {**ASYNC, "Prefer": "respond-async, handling=lenient"}


def tags(resource: dict) -> list[str]:
    return [t["code"] for t in resource.get("meta", {}).get("tag", [])]


def test_elements_cut_each_type_down_and_tag_it(bulk_api, record):  # noqa: F811
    manifest, files = run(bulk_api.fhir, _type="Patient,Observation,Organization",
                          _elements="code,Patient.gender")
    assert manifest["error"] == []
    for obs in files["Observation"]:
        assert set(obs) <= {"resourceType", "id", "meta", "code", "status"}  # status: mandatory in R4
        assert "code" in obs and "subject" not in obs and SUBSETTED in tags(obs)
    for person in files["Patient"]:
        assert "name" not in person and "gender" in person and SUBSETTED in tags(person)
        assert "code" not in person
    for org in files["Organization"]:  # a type no name applies to (`code` is not one of its elements)
        assert set(org) <= {"resourceType", "id", "meta"} and SUBSETTED in tags(org)
    _, whole = run(bulk_api.fhir, _type="Patient,Organization", _elements="Patient.gender")
    assert all("name" in o for o in whole["Organization"]) and SUBSETTED not in tags(whole["Organization"][0])
    for bad in ("Nope.id", "id;drop", "Patient."):
        assert_outcome(httpx.get(f"{bulk_api.fhir}/$export", params={"_elements": bad}, headers=ASYNC), 400)


def lenient_run(base: str, **params) -> tuple[dict, dict, list[dict]]:
    """An export kicked off with handling=lenient: (manifest, files, the error file's OperationOutcomes)."""
    kick = httpx.get(f"{base}/$export", params=params, headers=LENIENT)
    assert kick.status_code == 202, kick.text
    manifest, files = _finish(kick.headers["content-location"])
    errors = []
    for item in manifest["error"]:
        assert item["type"] == "OperationOutcome"
        got = httpx.get(item["url"], headers={"Accept": "application/fhir+ndjson"})
        assert got.status_code == 200 and got.headers["content-type"].startswith("application/fhir+ndjson")
        errors += [orjson.loads(line) for line in got.content.splitlines()]
    return manifest, files, errors


def _finish(status: str) -> tuple[dict, dict]:
    """Poll until complete: (manifest, resources by type)."""
    deadline = time.monotonic() + 30
    while (answer := httpx.get(status)).status_code == 202:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert answer.status_code == 200, answer.text
    manifest = answer.json()
    files = {i["type"]: [orjson.loads(x) for x in httpx.get(i["url"]).content.splitlines()]
             for i in manifest["output"]}
    return manifest, files


def test_lenient_export_names_an_unknown_type_in_the_error_file(bulk_api, record):  # noqa: F811
    strict = httpx.get(f"{bulk_api.fhir}/$export", params={"_type": "Patient,Nope"}, headers=ASYNC)
    assert_outcome(strict, 400)
    manifest, files, errors = lenient_run(bulk_api.fhir, _type="Patient,Nope")
    assert {record["a"], record["b"]} <= {p["id"] for p in files["Patient"]}
    assert len(errors) == 1 and errors[0]["resourceType"] == "OperationOutcome"
    assert "Nope" in errors[0]["issue"][0]["diagnostics"] and errors[0]["issue"][0]["severity"] == "error"
    assert_outcome(httpx.get(f"{bulk_api.fhir}/$export", params={"_type": "Nope"}, headers=LENIENT), 400)


def test_a_resource_that_cannot_be_written_is_named_and_the_rest_exported(bulk_api, record):  # noqa: F811
    org = httpx.post(f"{bulk_api.fhir}/Organization", json={"resourceType": "Organization", "name": "broken"})
    broken = org.json()["id"]
    with bulk_api.store.engine.begin() as conn:  # a stored row no JSON reader can read
        conn.execute(update(version).where((version.c.res_type == "Organization") &
                                           (version.c.res_id == broken)).values(raw=b'{"resourceType":\n'))
    manifest, files, errors = lenient_run(bulk_api.fhir, _type="Organization")
    assert record["org"] in {o["id"] for o in files["Organization"]}
    assert broken not in {o["id"] for o in files["Organization"]}
    assert [e["issue"][0]["diagnostics"] for e in errors] == [
        f"Organization/{broken} could not be exported: JSONDecodeError"]
    counted = next(i for i in manifest["output"] if i["type"] == "Organization")["count"]
    assert counted == len(files["Organization"])
