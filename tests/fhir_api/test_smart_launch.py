"""SMART App Launch v2 against a session, driven by fhirclient's OAuth2 flow (a real SMART client library).

The test is the browser (smart_browser.py): it opens the app's authorize URL, logs in as a user of the
operator's user store, answers the consent form when there is one and hands the redirect back to fhirclient,
which exchanges the code (PKCE S256) and then reads the record. The apps are registered clients.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from fhirclient import client as smart_client
from fhirclient.models.observation import Observation
from fhirclient.models.patient import Patient
from typer.testing import CliRunner

from rounds.cli import app as cli
from rounds.migrate import upgrade
from rounds.settings import Settings
from services.fhir_api.app import create_app
from services.fhir_api.auth.clients import register_client
from services.fhir_api.auth.launch import s256
from services.fhir_api.auth.scopes import parse_scopes
from services.fhir_api.auth.tokens import issue
from services.fhir_api.auth.users import add_user
from tests.fhir_api.conftest import LiveApi, assert_outcome, observation, patient, start_live
from tests.fhir_api.smart_browser import PASSWORD, Browser, hidden_fields
from tests.wiring import store_on

APP = "http://127.0.0.1:9/app"  # the app's launch URL; nothing listens there: the test follows no redirect
CALLBACK = f"{APP}/callback"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveApi, str]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('smart') / 'smart.sqlite'}"
    upgrade(url)
    store = store_on(url)
    bulk = str(tmp_path_factory.mktemp("smart-bulk"))
    app = create_app(Settings(database_url=url, auth=True, bulk_dir=bulk), store)
    api, server, thread = start_live(app, store)
    register_client(store.engine, "connector-app", "user/*.cruds", public=True, redirect_uris=(CALLBACK,))
    register_client(store.engine, "c", "user/*.cruds", public=True, redirect_uris=(CALLBACK,))
    add_user(store.engine, "ana", PASSWORD, None, "user/*.cruds")
    yield api, url
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def record(secured) -> dict:
    """Two patients, each with a lab and an encounter, in the shared record; a session onto it."""
    api, _ = secured
    admin = {"Authorization": "Bearer " + issue(api.app.state.auth.key, parse_scopes("system/*.cruds"),
                                                 expires_in=600)}
    ids: dict = {"admin": admin}
    for name in ("a", "b"):
        p = httpx.post(f"{api.fhir}/Patient", json=patient(f"smart-{name}"), headers=admin).json()
        obs = httpx.post(f"{api.fhir}/Observation", json=observation(p["id"], f"smart-{name}",
                                                                     "2150-01-01T00:00:00Z"), headers=admin)
        enc = httpx.post(f"{api.fhir}/Encounter", headers=admin, json={
            "resourceType": "Encounter", "status": "finished", "class": {"code": "IMP"},
            "subject": {"reference": f"Patient/{p['id']}"}, "period": {"start": "2150-01-01T00:00:00Z"}})
        ids[name], ids[f"obs_{name}"], ids[f"enc_{name}"] = p["id"], obs.json()["id"], enc.json()["id"]
    r = httpx.post(f"{api.root}/sessions", json={"now": "2180-01-01T00:00:00Z"}, headers=admin)
    ids["session"] = r.json()["id"]
    register_client(api.store.engine, "session-app", "user/*.rs", public=True, redirect_uris=(CALLBACK,),
                    fhir_base=r.json()["fhirBase"])
    return ids


def app_client(base: str, scope: str, launch: str | None = None, app_id: str = "connector-app"
               ) -> smart_client.FHIRClient:
    settings = {"app_id": app_id, "api_base": base, "redirect_uri": CALLBACK, "scope": scope}
    if launch is not None:
        settings["launch_token"] = launch
    return smart_client.FHIRClient(settings=settings)


BROWSER = Browser()  # logged in as ana once, then by its cookie


def browse(url: str, form: dict | None = None) -> httpx.Response:
    """The browser: GET the authorize URL (or POST the consent form); no redirect to the app is followed."""
    return BROWSER.open(url) if form is None else BROWSER.submit(url, form)


def consent_form(page: httpx.Response, **answers: str) -> dict:
    """The consent page's hidden fields (its CSRF value among them), with the user's answers."""
    return hidden_fields(page) | answers


def ehr_launch_url(api_url: str, db_url: str, session: str, **context: str) -> str:
    args = ["launch", "--session", session, "--app", APP, "--base-url", api_url, "--database-url", db_url]
    for name, value in context.items():
        args += [f"--{name}", value]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return result.output.strip()


@pytest.fixture
def auto_approve(secured) -> Iterator[None]:
    settings = secured[0].app.state.auth.settings
    settings.auth_auto_approve = True
    yield
    settings.auth_auto_approve = False


def test_discovery_and_metadata_advertise_the_launch(secured, record):
    api, _ = secured
    base = f"{api.root}/sessions/{record['session']}/fhir"
    doc = httpx.get(f"{base}/.well-known/smart-configuration").json()
    assert doc["authorization_endpoint"] == f"{api.root}/auth/authorize"
    assert {"authorization_code", "refresh_token"} <= set(doc["grant_types_supported"])
    assert doc["code_challenge_methods_supported"] == ["S256"]
    assert {"launch-ehr", "launch-standalone", "context-ehr-encounter"} <= set(doc["capabilities"])
    assert not {"authorize-post", "profile"} & set(doc["capabilities"]
                                                                    + doc["scopes_supported"])
    assert {"openid", "fhirUser", "sso-openid-connect"} <= set(doc["capabilities"] + doc["scopes_supported"])
    security = httpx.get(f"{base}/metadata").json()["rest"][0]["security"]
    uris = {e["url"]: e["valueUri"] for e in security["extension"][0]["extension"]}
    assert uris == {"token": f"{api.root}/auth/token", "authorize": f"{api.root}/auth/authorize"}


def test_ehr_launch_reads_the_patient_in_context_and_nothing_else(secured, record, auto_approve):
    api, db = secured
    launched = ehr_launch_url(api.root, db, record["session"], encounter=record["enc_a"])
    query = parse_qs(urlsplit(launched).query)
    base = query["iss"][0]
    assert base == f"{api.root}/sessions/{record['session']}/fhir"
    app = app_client(base, "launch user/*.rs openid offline_access", launch=query["launch"][0])
    redirect = browse(app.authorize_url)
    assert redirect.status_code == 302 and redirect.headers["location"].startswith(CALLBACK)
    app.handle_callback(redirect.headers["location"])
    assert app.patient_id == record["a"] and app.launch_context["encounter"] == record["enc_a"]
    granted = app.launch_context["scope"].split()
    assert "patient/*.rs" in granted and not [s for s in granted if s.startswith("user/")]  # confined
    assert app.patient.id == record["a"]
    labs = Observation.where({"code": "smart-a"}).perform_resources(app.server)
    assert [o.id for o in labs] == [record["obs_a"]]
    everything = Observation.where({}).perform_resources(app.server)  # narrowed to the compartment
    assert [o.id for o in everything] == [record["obs_a"]]
    with pytest.raises(Exception) as denied:
        Patient.read(record["b"], app.server)
    assert getattr(denied.value, "response", None) is not None and denied.value.response.status_code == 403
    token = {"Authorization": f"Bearer {app.server.auth.access_token}"}
    assert_outcome(httpx.get(f"{base}/Patient/{record['b']}", headers=token), 403)
    assert_outcome(httpx.get(f"{base}/Observation/{record['obs_b']}", headers=token), 403)
    assert_outcome(httpx.get(f"{api.fhir}/Patient/{record['a']}", headers=token), 403)  # not the shared one
    assert_outcome(httpx.post(f"{base}/Observation", headers=token,  # read scopes only
                              json=observation(record["a"], "x", "2150-01-02T00:00:00Z")), 403)
    # the refresh token keeps the context
    old = app.server.auth.access_token
    assert app.reauthorize() and app.server.auth.access_token != old
    assert app.launch_context["patient"] == record["a"]
    assert Patient.read(record["a"], app.server).id == record["a"]


def test_standalone_launch_picks_the_patient_on_the_consent_page(secured, record):
    api, _ = secured
    base = f"{api.root}/sessions/{record['session']}/fhir"
    # a standalone launch into a session: only an app registered for that session's base
    assert browse(app_client(base, "patient/*.rs").authorize_url).headers["location"] \
        .count("error=invalid_request") == 1
    app = app_client(base, "patient/*.rs", app_id="session-app")  # fhirclient adds launch/patient
    page = browse(app.authorize_url)
    assert page.status_code == 200 and 'name="patient"' in page.text
    assert browse(f"{api.root}/auth/authorize",
                  consent_form(page, decision="approve", patient="nobody")).headers["location"] \
        .count("error=invalid_request") == 1
    answer = consent_form(page, decision="approve", patient=record["b"])
    redirect = browse(f"{api.root}/auth/authorize", answer)
    app.handle_callback(redirect.headers["location"])
    assert app.patient.id == record["b"] and "refresh_token" not in app.launch_context
    assert [o.id for o in Observation.where({}).perform_resources(app.server)] == [record["obs_b"]]
    denied = browse(f"{api.root}/auth/authorize", consent_form(page, decision="deny", patient=record["b"]))
    assert parse_qs(urlsplit(denied.headers["location"]).query)["error"] == ["access_denied"]


def authorize(api: LiveApi, **params: str) -> httpx.Response:
    good = {"response_type": "code", "client_id": "c", "redirect_uri": CALLBACK, "scope": "launch/patient",
            "state": "s1", "code_challenge": s256("v" * 50), "code_challenge_method": "S256"}
    return browse(str(httpx.URL(f"{api.root}/auth/authorize", params={**good, **params})))


def redirected_error(response: httpx.Response) -> str:
    assert response.status_code == 302, response.text
    query = parse_qs(urlsplit(response.headers["location"]).query)
    assert query["state"] == ["s1"]
    return query["error"][0]


def test_bad_authorization_requests(secured, record, auto_approve):
    api, db = secured
    base = f"{api.root}/sessions/{record['session']}/fhir"
    assert redirected_error(authorize(api, aud="http://elsewhere/fhir")) == "invalid_request"
    assert redirected_error(authorize(api, aud=f"{api.root}/sessions/nope/fhir")) == "invalid_request"
    assert redirected_error(authorize(api, aud=base, code_challenge_method="plain")) == "invalid_request"
    assert redirected_error(authorize(api, aud=base, response_type="token")) == "unsupported_response_type"
    assert redirected_error(authorize(api, aud=base, launch="forged")) == "invalid_request"
    assert authorize(api, aud=base, redirect_uri="javascript:alert(1)").status_code == 400
    launched = parse_qs(urlsplit(ehr_launch_url(api.root, db, record["session"], patient=record["a"])).query)
    other_origin = authorize(api, aud=base, launch=launched["launch"][0], redirect_uri="http://evil.example/cb")
    assert other_origin.status_code == 400  # never redirected to an app the launch was not for
    wrong_session = f"{api.root}/fhir"  # the launch is into the session: the shared base is not its audience
    refused = authorize(api, aud=wrong_session, launch=launched["launch"][0])
    assert redirected_error(refused) == "invalid_request"
    assert CliRunner().invoke(cli, ["launch", "--session", "nope", "--app", APP, "--patient", record["a"],
                                    "--database-url", db]).exit_code == 2


def test_token_endpoint_holds_the_code_to_its_client_verifier_and_single_use(secured, record, auto_approve):
    api, _ = secured
    base = f"{api.root}/sessions/{record['session']}/fhir"
    response = authorize(api, aud=base, scope="launch/patient patient/*.rs", client_id="session-app")
    assert response.status_code == 200  # standalone launch/patient: the patient is asked even on auto-approve
    approved = consent_form(response, decision="approve", patient=record["a"])
    answer = browse(f"{api.root}/auth/authorize", approved)
    code = parse_qs(urlsplit(answer.headers["location"]).query)["code"][0]
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": CALLBACK,
            "client_id": "session-app", "code_verifier": "v" * 50}
    token_url = f"{api.root}/auth/token"
    assert_outcome(httpx.get(f"{base}/Patient", headers={"Authorization": f"Bearer {code}"}), 401)
    for bad in ({"code_verifier": "w" * 50}, {"client_id": "c"}, {"redirect_uri": APP}, {"code": "x"}):
        r = httpx.post(token_url, data={**form, **bad})
        assert r.status_code == 400 and r.json()["error"] == "invalid_grant", r.text
    unknown = httpx.post(token_url, data={**form, "client_id": "other"})
    assert unknown.status_code == 401 and unknown.json()["error"] == "invalid_client"
    good = httpx.post(token_url, data=form)
    assert good.status_code == 200 and good.json()["patient"] == record["a"], good.text
    assert httpx.post(token_url, data=form).json()["error"] == "invalid_grant"  # used once
    assert httpx.post(token_url, data={"grant_type": "refresh_token", "refresh_token": code,
                                       "client_id": "session-app"}) \
        .json()["error"] == "invalid_grant"
    assert httpx.post(token_url, data={"grant_type": "password"}).json()["error"] == "unsupported_grant_type"


def test_bulk_export_takes_a_token_with_search_on_the_base_and_refuses_a_launched_app(secured, record,
                                                                                     auto_approve):
    api, db = secured
    admin = record["admin"]
    session = httpx.post(f"{api.root}/sessions", json={"now": "2180-01-01T00:00:00Z"}, headers=admin).json()
    base, own = session["fhirBase"], {"Authorization": f"Bearer {session['accessToken']}"}
    kick = httpx.get(f"{base}/Patient/$export", params={"_type": "Patient"},
                     headers={**own, "Prefer": "respond-async"})
    assert kick.status_code == 202, kick.text
    status = kick.headers["content-location"]
    assert_outcome(httpx.get(status), 401)
    assert_outcome(httpx.get(f"{api.fhir}/$export", headers={**own, "Prefer": "respond-async"}), 403)
    launched = parse_qs(urlsplit(ehr_launch_url(api.root, db, session["id"], patient=record["a"])).query)
    app = app_client(base, "launch patient/*.rs", launch=launched["launch"][0])
    app.handle_callback(browse(app.authorize_url).headers["location"])
    confined = {"Authorization": f"Bearer {app.server.auth.access_token}", "Prefer": "respond-async"}
    assert_outcome(httpx.get(f"{base}/Patient/$export", headers=confined), 403)
