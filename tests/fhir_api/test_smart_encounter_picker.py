"""Standalone launch with `launch/encounter`: after the patient picker the consent page offers the chosen
patient's stays as the audience session's clock shows them, and the token response answers `encounter`.

Driven by Python fhirclient 4.4 (it adds `launch/patient` to a standalone launch) and by authlib 1.9's OAuth 2
client; the test is the browser (smart_browser.py) that answers the two consent pages.
"""

from __future__ import annotations

import re
import secrets

import httpx
import pytest
from authlib.integrations.httpx_client import OAuth2Client
from fhirclient.models.encounter import Encounter

from services.fhir_api.auth.clients import register_client
from services.fhir_api.auth.scopes import parse_scopes
from services.fhir_api.auth.tokens import issue
from tests.fhir_api import test_smart_launch as smart_launch
from tests.fhir_api.conftest import patient
from tests.fhir_api.test_smart_launch import CALLBACK, app_client, browse, consent_form

secured = smart_launch.secured  # the SMART launch tests' server (auth on, user `ana` sees every patient)


@pytest.fixture(scope="module")
def stays(secured) -> dict:
    """A patient with a stay in 2150 and one in 2170, and a session whose clock stands in 2160, with a public
    app registered for that session's base."""
    api, _ = secured
    admin = _admin(api)
    p = httpx.post(f"{api.fhir}/Patient", json=patient("picker"), headers=admin).json()["id"]
    ids: dict = {"patient": p}
    for year in ("2150", "2170"):
        enc = httpx.post(f"{api.fhir}/Encounter", headers=admin, json={
            "resourceType": "Encounter", "status": "finished",
            "class": {"code": "IMP", "display": "inpatient"},
            "subject": {"reference": f"Patient/{p}"},
            "period": {"start": f"{year}-01-01T00:00:00Z", "end": f"{year}-01-05T00:00:00Z"}})
        assert enc.status_code == 201, enc.text
        ids[year] = enc.json()["id"]
    session = httpx.post(f"{api.root}/sessions", json={"now": "2160-01-01T00:00:00Z"}, headers=admin).json()
    ids["base"] = session["fhirBase"]
    register_client(api.store.engine, "picker-app", "user/*.rs", public=True, redirect_uris=(CALLBACK,),
                    fhir_base=session["fhirBase"])
    return ids


def _admin(api) -> dict:
    return {"Authorization": "Bearer " + issue(api.app.state.auth.key, parse_scopes("system/*.cruds"),
                                                expires_in=600)}


def offered(page: httpx.Response) -> list[str]:
    """The encounter ids the consent page's picker offers."""
    picker = re.search(r'<select name="encounter" required>(.*?)</select>', page.text, re.S)
    assert picker is not None, page.text
    return re.findall(r'<option value="([^"]+)">', picker.group(1))


def pick(page: httpx.Response, **answers: str) -> httpx.Response:
    """Answer a consent page (approve) with the picker's `answers`."""
    return browse(str(page.url.copy_with(path="/auth/authorize", query=None)),
                  consent_form(page, decision="approve", **answers))


def test_discovery_lists_the_standalone_encounter_context(secured):
    api, _ = secured
    doc = httpx.get(f"{api.root}/.well-known/smart-configuration").json()
    assert "context-standalone-encounter" in doc["capabilities"]
    assert "launch/encounter" in doc["scopes_supported"]


def test_fhirclient_picks_a_stay_the_clock_shows(secured, stays):
    app = app_client(stays["base"], "launch/encounter patient/*.rs", app_id="picker-app")
    first = browse(app.authorize_url)
    assert first.status_code == 200 and '<select name="encounter"' not in first.text  # the patient first
    second = pick(first, patient=stays["patient"])
    assert second.status_code == 200, second.text
    assert offered(second) == [stays["2150"]]  # the 2170 stay is after the session's clock
    assert "inpatient" in second.text
    redirect = pick(second, encounter=stays["2150"])
    assert redirect.status_code == 302, redirect.text
    app.handle_callback(redirect.headers["location"])
    assert app.patient_id == stays["patient"] and app.launch_context["encounter"] == stays["2150"]
    assert "launch/encounter" in app.launch_context["scope"].split()
    assert Encounter.read(stays["2150"], app.server).id == stays["2150"]


def test_a_stay_the_picker_did_not_offer_is_refused(secured, stays):
    app = app_client(stays["base"], "launch/encounter patient/*.rs", app_id="picker-app")
    second = pick(browse(app.authorize_url), patient=stays["patient"])
    for bad in (stays["2170"], "nope"):  # after the clock; no such stay
        refused = pick(second, encounter=bad)
        assert refused.status_code == 302
        query = httpx.URL(refused.headers["location"]).params
        assert query["error"] == "invalid_request" and "Encounter/" in query["error_description"]
    other = httpx.post(f"{secured[0].fhir}/Patient", json=patient("no-stays"), headers=_admin(secured[0]))
    answer = pick(second, patient=other.json()["id"], encounter=stays["2150"])  # another patient's form
    assert httpx.URL(answer.headers["location"]).params["error"] == "invalid_request"


def test_authlib_standalone_launch_answers_the_encounter(secured, stays):
    api, _ = secured
    config = httpx.get(f"{stays['base']}/.well-known/smart-configuration").json()
    client = OAuth2Client("picker-app", redirect_uri=CALLBACK, code_challenge_method="S256",
                          scope="launch/patient launch/encounter patient/Encounter.rs openid fhirUser")
    verifier = secrets.token_urlsafe(48)
    url, _state = client.create_authorization_url(config["authorization_endpoint"], code_verifier=verifier,
                                                  aud=stays["base"])
    second = pick(browse(url), patient=stays["patient"])
    redirect = pick(second, encounter=offered(second)[0])
    token = client.fetch_token(config["token_endpoint"], authorization_response=redirect.headers["location"],
                               code_verifier=verifier)
    assert token["patient"] == stays["patient"] and token["encounter"] == stays["2150"]
    read = httpx.get(f"{stays['base']}/Encounter/{token['encounter']}",
                     headers={"Authorization": f"Bearer {token['access_token']}"})
    assert read.status_code == 200 and read.json()["subject"]["reference"] == f"Patient/{stays['patient']}"


def test_a_patient_without_a_visible_stay_launches_without_one(secured, stays):
    api, _ = secured
    lonely = httpx.post(f"{api.fhir}/Patient", json=patient("lonely"), headers=_admin(api)).json()["id"]
    app = app_client(stays["base"], "launch/encounter patient/*.rs", app_id="picker-app")
    redirect = pick(browse(app.authorize_url), patient=lonely)
    assert redirect.status_code == 302, redirect.text
    app.handle_callback(redirect.headers["location"])
    assert app.patient_id == lonely and "encounter" not in app.launch_context
