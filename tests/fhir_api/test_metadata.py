"""CapabilityStatement truthfulness, the interaction hook, OpenAPI docs and `rounds serve`."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
import time

import httpx
import pytest

from tests.fhir_api.conftest import free_port, patient
from tests.fhir_api.test_request_limits import raw, request

pytestmark = pytest.mark.slow  # whole pipelines, subprocesses or real services: not in the fast lane

SAMPLE_VALUES = {
    "date": "ge2150-01-01",
    "number": "1",
    "quantity": "1",
    "reference": "Patient/x",
    "uri": "http://x",
    "composite": "8480-6$2150",  # a code, then what every value kind reads: quantity, token, string, date
}


def test_capability_statement_lists_what_works(client, api):
    r = client.get("/metadata")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/fhir+json")
    statement = r.json()
    assert statement["resourceType"] == "CapabilityStatement" and statement["fhirVersion"] == "4.0.1"
    assert statement["implementation"]["url"] == api.fhir
    rest = statement["rest"][0]
    assert {i["code"] for i in rest["interaction"]} == {
        "transaction",
        "batch",
        "search-system",
        "history-system",
    }
    searchable = [res for res in rest["resource"] if res.get("searchParam")]
    assert {"Patient", "Observation", "Encounter", "ServiceRequest", "AuditEvent"} <= {
        r["type"] for r in searchable
    }
    patient_entry = next(res for res in rest["resource"] if res["type"] == "Patient")
    assert patient_entry["operation"][0]["name"] == "everything"
    assert "Observation:subject" in patient_entry["searchRevInclude"]
    strict = {"Prefer": "handling=strict"}
    for res in searchable:  # every advertised parameter is accepted under strict handling
        for param in res["searchParam"]:
            value = SAMPLE_VALUES.get(param["type"], "x")
            got = client.get(f"/{res['type']}", params={param["name"]: value, "_count": 1}, headers=strict)
            assert got.status_code == 200, (res["type"], param["name"], got.text[:300])
    unlisted = client.get("/Observation", params={"not-a-param": "x"}, headers=strict)
    assert unlisted.status_code == 400


def test_interaction_listeners_see_every_request(api, tag):
    seen = []

    def boom(_event):
        raise RuntimeError("a broken listener must not break the API")

    class SessionsOnly(list):
        def __call__(self, event) -> None:
            self.append(event)

        def wants(self, method: str, path: str) -> bool:
            return path.startswith("/sessions/")

    picky = SessionsOnly()
    api.app.state.interaction_listeners.extend([seen.append, boom, picky])
    try:
        session = httpx.post(f"{api.root}/sessions", json={"now": "2150-01-01"}).json()
        body = httpx.Request("POST", "/", json=patient(tag)).content
        created = httpx.post(
            f"{session['fhirBase']}/Patient", content=body, headers={"Content-Type": "application/fhir+json"}
        )
        missing = httpx.get(f"{api.fhir}/Patient/none-{tag}")
    finally:
        api.app.state.interaction_listeners.clear()
    assert created.status_code == 201 and missing.status_code == 404
    write = next(e for e in seen if e.method == "POST" and e.resource_type == "Patient")
    assert write.session_id == session["id"] and write.status == 201
    assert write.resource_id == created.json()["id"]
    assert write.request_digest == hashlib.sha256(body).hexdigest()
    assert write.response_digest == hashlib.sha256(created.content).hexdigest()
    assert write.latency_ms > 0 and write.path == f"/sessions/{session['id']}/fhir/Patient"
    read = next(e for e in seen if e.method == "GET")
    assert read.session_id is None and read.status == 404 and read.resource_id == f"none-{tag}"
    assert [e.path for e in picky] == [write.path]  # asked first: the /fhir read, POST /sessions pass by


def test_an_exchange_is_recorded_before_its_client_has_the_response(api, tag):
    """A slow listener delays the end of the response it wants, not the other way round."""
    finished: list[str] = []

    class Slow:
        async def __call__(self, event) -> None:
            await asyncio.sleep(0.2)  # a recorder waiting on its database
            finished.append(event.path)

        def wants(self, method: str, path: str) -> bool:
            return path.startswith("/sessions/")

    api.app.state.interaction_listeners.append(Slow())
    try:
        session = httpx.post(f"{api.root}/sessions", json={"now": "2150-01-01"}).json()
        response = httpx.get(f"{session['fhirBase']}/Patient", params={"identifier": tag})
        done_when_answered = list(finished)
        shared = httpx.get(f"{api.fhir}/Patient", params={"identifier": tag})
    finally:
        api.app.state.interaction_listeners.clear()
    assert response.status_code == 200 and response.json()["resourceType"] == "Bundle"
    assert done_when_answered == [f"/sessions/{session['id']}/fhir/Patient"]
    assert shared.status_code == 200 and len(finished) == 1  # /fhir: not wanted, never held


def test_openapi_docs(api):
    assert httpx.get(f"{api.root}/docs").status_code == 200
    paths = httpx.get(f"{api.root}/openapi.json").json()["paths"]
    assert "/fhir/{type}/{id}" in paths and "/sessions/{session_id}/fhir/{type}/{id}" in paths
    assert "/sessions" in paths


def test_rounds_serve(tmp_path):
    port = free_port()
    url = f"sqlite:///{tmp_path / 'serve.sqlite'}"
    env = {**os.environ, "ROUNDS_BASE_URL": ""}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rounds.cli",
            "serve",
            "--database-url",
            url,
            "--port",
            str(port),
            "--base-url",
            "https://ehr.example.org/base",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/fhir/metadata")
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stdout.read().decode()
                assert time.monotonic() < deadline, "rounds serve did not come up"
                time.sleep(0.2)
        assert r.status_code == 200
        assert r.json()["implementation"]["url"] == "https://ehr.example.org/base/fhir"
        s = httpx.post(f"http://127.0.0.1:{port}/sessions", json={"now": "2150-01-01"}).json()
        assert s["fhirBase"] == f"https://ehr.example.org/base/sessions/{s['id']}/fhir"
        long_url = raw(f"http://127.0.0.1:{port}", request("/fhir/Patient?family=" + "a" * 100_000))
        assert long_url[0] == 414 and long_url[1]["content-type"].startswith("application/fhir+json")
    finally:
        proc.terminate()
        proc.wait(timeout=20)
