"""SMART's Bulk Data client `smart-fetch` 1.0.3 (PyPI, its `bulk` command with its defaults) exports a session
through SMART Backend Services: it signs a client assertion with its own key (RS384, `private_key_jwt`), gets
`system/<Type>.read` scopes, kicks the export off with its default `_typeFilter` (Observation categories),
polls, and downloads every file with `Accept: application/fhir+ndjson`. What it wrote, per type, equals what
the session's own searches count."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import RSAKey

from rounds.migrate import upgrade
from rounds.settings import Settings
from services.fhir_api.app import create_app
from services.fhir_api.auth.clients import register_client
from services.fhir_api.auth.scopes import parse_scopes
from services.fhir_api.auth.tokens import issue
from tests.fhir_api.conftest import LiveApi, observation, patient, start_live
from tests.wiring import store_on

smart_fetch = pytest.importorskip("smart_fetch", reason="smart-fetch is in the test extra (pyproject.toml)")
CATEGORY = "http://terminology.hl7.org/CodeSystem/observation-category"
# smart-fetch's default Observation filter (smart_fetch/filtering.py): the US Core categories
DEFAULT_CATEGORIES = "social-history,vital-signs,imaging,laboratory,survey,exam,procedure,therapy,activity"
PATIENT_TYPES = ["Patient", "Encounter", "AllergyIntolerance", "Condition", "Device", "DiagnosticReport",
                 "DocumentReference", "EpisodeOfCare", "Immunization", "MedicationDispense",
                 "MedicationRequest", "Observation", "Procedure", "ServiceRequest", "Specimen"]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveApi, dict]]:
    """Auth on; three patients with labs, vital signs, an uncategorized and a `fitness` Observation, an
    encounter and a condition each; a session onto the record; the backend client registered with its
    public key only."""
    folder = tmp_path_factory.mktemp("smart-fetch")
    url = f"sqlite:///{folder / 'bulk.sqlite'}"
    upgrade(url)
    store = store_on(url)
    api, server, thread = start_live(create_app(Settings(database_url=url, auth=True,
                                                         bulk_dir=str(folder / "bulk")), store), store)
    admin = {"Authorization": "Bearer " + issue(api.app.state.auth.key, parse_scopes("system/*.cruds"),
                                                 expires_in=600)}
    for n in range(3):
        pid = httpx.post(f"{api.fhir}/Patient", json=patient(f"sf-{n}"), headers=admin).json()["id"]
        kinds = (("lab", "laboratory"), ("vs", "vital-signs"), ("fit", "fitness"), ("none", None))
        for code, category in kinds:
            body = observation(pid, f"sf-{code}", f"2150-01-0{n + 1}T00:00:00Z")
            if category:
                body["category"] = [{"coding": [{"system": CATEGORY, "code": category}]}]
            assert httpx.post(f"{api.fhir}/Observation", json=body, headers=admin).status_code == 201
        for body in ({"resourceType": "Encounter", "status": "finished", "class": {"code": "IMP"}},
                     {"resourceType": "Condition", "code": {"text": "sepsis"}}):
            body["subject"] = {"reference": f"Patient/{pid}"}
            made = httpx.post(f"{api.fhir}/{body['resourceType']}", json=body, headers=admin)
            assert made.status_code == 201, made.text
    session = httpx.post(f"{api.root}/sessions", json={"now": "2180-01-01T00:00:00Z"}, headers=admin).json()
    key = RSAKey.generate_key(2048, parameters={"kid": "bulk-1", "alg": "RS384", "key_ops": ["sign"]})
    private = folder / "bulk-client.jwks"
    private.write_text(json.dumps({"keys": [key.as_dict(private=True)]}))
    public = {"keys": [key.as_dict(private=False) | {"kid": "bulk-1", "alg": "RS384"}]}
    register_client(store.engine, "bulk-client", "system/*.rs", jwks=json.dumps(public))
    yield api, {"base": session["fhirBase"], "jwks": private, "admin": admin, "folder": folder}
    server.should_exit = True
    thread.join(timeout=10)


def written(out: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for path in out.glob("*.ndjson*"):
        if path.name.split(".")[0] not in PATIENT_TYPES:
            continue  # its log.ndjson
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as lines:
            for line in lines:
                if line.strip():
                    kind = json.loads(line)["resourceType"]
                    counts[kind] = counts.get(kind, 0) + 1
    return counts


def test_smart_fetch_exports_the_session_with_backend_services(served):
    api, ctx = served
    out = ctx["folder"] / "out"
    cli = [sys.executable, "-c", "from smart_fetch.cli.main import main_cli; main_cli()"]
    run = subprocess.run([*cli, "bulk", "--fhir-url", ctx["base"], "--smart-client-id", "bulk-client",
                          "--smart-key", str(ctx["jwks"]), str(out)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    expected = {}
    for kind in PATIENT_TYPES:
        params = {"_summary": "count"} | ({"category": DEFAULT_CATEGORIES} if kind == "Observation" else {})
        total = httpx.get(f"{ctx['base']}/{kind}", params=params, headers=ctx["admin"]).json()["total"]
        if total:
            expected[kind] = total
    assert expected == {"Patient": 3, "Encounter": 3, "Condition": 3, "Observation": 6}
    assert written(out) == expected


def test_a_bad_assertion_is_refused(served):
    api, ctx = served
    token_url = f"{api.root}/auth/token"
    other = RSAKey.generate_key(2048, parameters={"kid": "bulk-1"})
    forged = jwt.encode({"alg": "RS384", "kid": "bulk-1"}, {"iss": "bulk-client", "sub": "bulk-client",
                        "aud": token_url, "exp": 2_000_000_000, "jti": "x"}, other, algorithms=["RS384"])
    answer = httpx.post(token_url, data={"grant_type": "client_credentials", "scope": "system/Patient.read",
                                         "client_assertion_type":
                                             "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                                         "client_assertion": forged})
    assert answer.status_code == 401 and answer.json()["error"] == "invalid_client"


def test_lenient_export_leaves_out_a_type_the_token_may_not_read(served):
    """Bulk Data IG: with `Prefer: handling=lenient` the types the token may export are, and the others are
    named in the error file; without it the kick-off is refused."""
    api, ctx = served
    token = issue(api.app.state.auth.key, parse_scopes("system/Patient.rs"), expires_in=600)
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/fhir+json"}
    params = {"_type": "Patient,Observation"}
    refused = httpx.get(f"{ctx['base']}/$export", params=params,
                        headers={**headers, "Prefer": "respond-async"})
    assert refused.status_code == 403
    kick = httpx.get(f"{ctx['base']}/$export", params=params,
                     headers={**headers, "Prefer": "respond-async, handling=lenient"})
    assert kick.status_code == 202, kick.text
    for _ in range(300):
        answer = httpx.get(kick.headers["content-location"], headers=headers)
        if answer.status_code != 202:
            break
        time.sleep(0.05)
    manifest = answer.json()
    assert [o["type"] for o in manifest["output"]] == ["Patient"] and manifest["output"][0]["count"] == 3
    [error] = manifest["error"]
    lines = httpx.get(error["url"], headers=headers).content.splitlines()
    assert [json.loads(line)["issue"][0]["diagnostics"] for line in lines] == [
        "the token's scopes do not allow exporting Observation: not exported"]
