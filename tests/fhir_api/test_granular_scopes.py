"""SMART v2 granular scopes: `patient/Observation.rs?category=laboratory` granted through an EHR launch
(fhirclient 4.4 drives it) and held on every read and search (services/fhir_api/auth/constraints.py); refresh
narrowing by coverage; what is refused with a reason."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from fhirclient.models.observation import Observation

from services.fhir_api.auth.scopes import ScopeError, narrow, parse_scopes
from tests.fhir_api import test_smart_launch as smart_launch
from tests.fhir_api.conftest import assert_outcome, observation
from tests.fhir_api.test_smart_launch import app_client, browse, ehr_launch_url

secured, record, auto_approve = smart_launch.secured, smart_launch.record, smart_launch.auto_approve
CATEGORY = "http://terminology.hl7.org/CodeSystem/observation-category"
LABS = "patient/Observation.rs?category=laboratory"


@pytest.fixture(scope="module")
def categorized(secured, record) -> dict:
    """Patient a's lab and vital sign in the record's session."""
    api, _ = secured
    base = f"{api.root}/sessions/{record['session']}/fhir"
    ids = {"base": base}
    for name, category in (("lab", "laboratory"), ("vital", "vital-signs")):
        body = observation(record["a"], f"g-{name}", "2150-01-02T00:00:00Z") | {
            "category": [{"coding": [{"system": CATEGORY, "code": category}]}]}
        made = httpx.post(f"{base}/Observation", json=body, headers=record["admin"])
        assert made.status_code == 201, made.text
        ids[name] = made.json()["id"]
    return ids


def launched(secured, record, scope: str):
    api, db = secured
    url = ehr_launch_url(api.root, db, record["session"], patient=record["a"])
    app = app_client(parse_qs(urlsplit(url).query)["iss"][0], scope,
                     launch=parse_qs(urlsplit(url).query)["launch"][0])
    app.handle_callback(browse(app.authorize_url).headers["location"])
    return app


def test_a_category_scope_reads_and_searches_labs_only(secured, record, categorized, auto_approve):
    app = launched(secured, record, f"launch {LABS} patient/Patient.rs offline_access")
    assert LABS in app.launch_context["scope"].split()
    found = {o.id for o in Observation.where({}).perform_resources(app.server)}
    assert categorized["lab"] in found and categorized["vital"] not in found
    assert all(c.coding[0].code == "laboratory" for o in Observation.where({}).perform_resources(app.server)
               for c in o.category)
    base, token = categorized["base"], {"Authorization": f"Bearer {app.server.auth.access_token}"}
    assert httpx.get(f"{base}/Observation/{categorized['lab']}", headers=token).status_code == 200
    assert_outcome(httpx.get(f"{base}/Observation/{categorized['vital']}", headers=token), 403)
    assert_outcome(httpx.get(f"{base}/Observation/{categorized['vital']}/_history/1", headers=token), 403)
    vitals = httpx.get(f"{base}/Observation", params={"category": "vital-signs"}, headers=token).json()
    assert vitals.get("entry", []) == []  # ANDed with the constraint
    posted = httpx.post(f"{base}/Observation/_search", data={"code": "g-vital"}, headers=token).json()
    assert posted.get("entry", []) == []
    assert httpx.get(f"{base}/Patient/{record['a']}", headers=token).status_code == 200  # unconstrained type
    for refused in (f"{base}/Observation?_include=Observation:subject", f"{base}/_history",
                    f"{base}/Patient?_revinclude=Observation:subject", f"{base}/Observation/_history",
                    f"{base}/Patient/{record['a']}/$everything"):
        answer = assert_outcome(httpx.get(refused, headers=token), 403)
        assert "query-constrained" in answer["issue"][0]["diagnostics"], refused
    batch = {"resourceType": "Bundle", "type": "batch", "entry": [
        {"request": {"method": "GET", "url": f"Observation/{categorized['vital']}"}}]}
    assert_outcome(httpx.post(base, json=batch, headers=token), 403)


def test_refresh_narrows_by_coverage(secured, record, categorized, auto_approve):
    api, _ = secured
    app = launched(secured, record, "launch patient/*.rs offline_access")
    token_url = f"{api.root}/auth/token"
    refresh = app.server.auth.refresh_token
    narrowed = httpx.post(token_url, data={"grant_type": "refresh_token", "refresh_token": refresh,
                                           "client_id": "connector-app", "scope": f"{LABS} offline_access"})
    assert narrowed.status_code == 200, narrowed.text
    token = {"Authorization": f"Bearer {narrowed.json()['access_token']}"}
    assert narrowed.json()["scope"] == f"{LABS} offline_access"
    assert_outcome(httpx.get(f"{categorized['base']}/Observation/{categorized['vital']}", headers=token), 403)
    assert_outcome(httpx.get(f"{categorized['base']}/Patient/{record['a']}", headers=token), 403)
    wider = httpx.post(token_url, data={"grant_type": "refresh_token", "refresh_token": refresh,
                                        "client_id": "connector-app", "scope": "patient/*.cruds"})
    assert wider.status_code == 400 and wider.json()["error"] == "invalid_scope"
    again = httpx.post(token_url, data={"grant_type": "refresh_token", "client_id": "connector-app",
                                        "refresh_token": narrowed.json()["refresh_token"],
                                        "scope": "patient/Observation.rs"})  # wider than the labs it has now
    assert again.status_code == 400 and again.json()["error"] == "invalid_scope"


def test_scope_parsing_coverage_and_narrowing():
    labs, = parse_scopes(LABS)
    assert labs.params == (("category", "laboratory"),) and str(labs) == LABS
    unconstrained, = parse_scopes("patient/Observation.rs")
    assert unconstrained.covers(labs) and not labs.covers(unconstrained)
    assert narrow(parse_scopes("system/*.cruds"), parse_scopes("system/*.rs")) == parse_scopes("system/*.rs")
    assert narrow(parse_scopes("user/*.rs"), parse_scopes(LABS.replace("patient", "user"))) \
        == parse_scopes("user/Observation.rs?category=laboratory")
    for bad in ("patient/Observation.rs?nonsense=1", "patient/*.rs?category=laboratory",
                "patient/Observation.rs?category="):
        with pytest.raises(ScopeError):
            parse_scopes(bad)
