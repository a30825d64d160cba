"""SMART's own JavaScript client (npm `fhirclient`, scripts/jsclient.sh) in headless Chromium with web
security on: the app is served from another origin than the API, so every call it makes — discovery, the token
endpoint, the FHIR reads, the refresh — crosses origins and needs CORS (services/fhir_api/http/cors.py).

The app (smart_app/) is the client's own flow: `FHIR.oauth2.authorize` on its launch page,
`FHIR.oauth2.ready` on its redirect page, then `client.patient.read()`, a search, `client.refresh()` and a
read.
"""

from __future__ import annotations

import functools
import os
import shutil
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest
from typer.testing import CliRunner

from rounds.cli import app as cli
from rounds.migrate import upgrade
from rounds.settings import Settings
from services.fhir_api.app import create_app
from services.fhir_api.auth.clients import register_client
from services.fhir_api.auth.scopes import parse_scopes
from services.fhir_api.auth.tokens import issue
from services.fhir_api.auth.users import add_user
from tests.consumers.report.conftest import IN_CI, chromium  # noqa: F401 - the headless browser fixture
from tests.fhir_api.cdp import Chromium
from tests.fhir_api.conftest import observation, patient, start_live
from tests.wiring import store_on

ROOT = Path(__file__).resolve().parents[2]
VERSION = "2.6.3"


@pytest.fixture(scope="module")
def bundle() -> Path:
    found = Path(os.environ.get("ROUNDS_FHIRCLIENT_JS")
                 or ROOT / f".cache/npm/fhirclient-{VERSION}/package/build/fhir-client.js")
    if not found.is_file():
        message = f"no fhirclient {VERSION} browser bundle at {found} (scripts/jsclient.sh install)"
        if IN_CI:
            pytest.fail(f"{message}; CI=true makes this a failure", pytrace=False)
        pytest.skip(message)
    return found


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def app_origin(bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The app's own web server: its two pages and the client bundle, on its own port (another origin)."""
    folder = tmp_path_factory.mktemp("smart-app")
    for page in (Path(__file__).parent / "smart_app").glob("*.html"):
        shutil.copy(page, folder / page.name)
    shutil.copy(bundle, folder / "fhir-client.js")
    handler = functools.partial(QuietHandler, directory=str(folder))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def record(app_origin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The API with auth on (approvals for `ana`, who sees everyone, without a login); two patients with a
    lab and an encounter each; a session; the app registered for that session's base."""
    url = f"sqlite:///{tmp_path_factory.mktemp('smart-js') / 'smart.sqlite'}"
    upgrade(url)
    store = store_on(url)
    settings = Settings(database_url=url, auth=True, bulk_dir=str(tmp_path_factory.mktemp("bulk")),
                        auth_auto_approve=True, auth_auto_approve_user="ana")
    api, server, thread = start_live(create_app(settings, store), store)
    add_user(store.engine, "ana", "correct horse battery", None, "user/*.rs")
    admin = {"Authorization": "Bearer " + issue(api.app.state.auth.key, parse_scopes("system/*.cruds"),
                                                 expires_in=600)}
    ids: dict = {"api": api, "db": url}
    for name in ("a", "b"):
        p = httpx.post(f"{api.fhir}/Patient", json=patient(f"js-{name}"), headers=admin).json()
        obs = httpx.post(f"{api.fhir}/Observation", headers=admin,
                         json=observation(p["id"], f"js-{name}", "2150-01-01T00:00:00Z")).json()
        enc = httpx.post(f"{api.fhir}/Encounter", headers=admin, json={
            "resourceType": "Encounter", "status": "finished", "class": {"code": "IMP"},
            "subject": {"reference": f"Patient/{p['id']}"},
            "period": {"start": "2150-01-01T00:00:00Z"}}).json()
        ids[name], ids[f"obs_{name}"], ids[f"enc_{name}"] = p["id"], obs["id"], enc["id"]
    session = httpx.post(f"{api.root}/sessions", json={"now": "2180-01-01T00:00:00Z"}, headers=admin).json()
    ids["session"], ids["base"] = session["id"], session["fhirBase"]
    register_client(store.engine, "js-app", "user/*.rs", public=True,
                    redirect_uris=(f"{app_origin}/index.html",), fhir_base=session["fhirBase"])
    yield ids
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def browser(chromium: Path, tmp_path: Path) -> Iterator[Chromium]:  # noqa: F811 - the imported fixture
    tab = Chromium(chromium, tmp_path / "profile")
    yield tab
    tab.close()


def app_result(tab: Chromium) -> dict:
    result = tab.wait_for("window.result")
    assert "error" not in result, result["error"]
    return result


def test_ehr_launch_reads_the_patient_in_context_and_refreshes(browser, record, app_origin):
    args = ["launch", "--session", record["session"], "--app", f"{app_origin}/launch.html",
            "--encounter", record["enc_a"], "--base-url", record["api"].root, "--database-url", record["db"]]
    launched = CliRunner().invoke(cli, args)
    assert launched.exit_code == 0, launched.output
    browser.go(f"{launched.output.strip()}&scope=launch+openid+fhirUser+patient/*.rs+offline_access")
    result = app_result(browser)
    assert result["patient"] == record["a"] and result["again"] == record["a"]
    assert result["encounter"] == record["enc_a"]
    assert result["labs"] == [record["obs_a"]]  # the compartment only
    assert result["refreshed"] and "patient/*.rs" in result["scope"].split()
    assert result["fhirUser"] == "Practitioner/ana"  # client.getFhirUser(), from the id_token
    other = (f"FHIR.oauth2.ready().then(c => c.request('Patient/{record['b']}'))"
             ".then(() => 'read', e => e.status)")
    assert browser.evaluate(other) == 403  # the token's patient only, and the 403 is readable cross-origin


def test_standalone_launch_picks_the_patient_on_the_consent_page(browser, record, app_origin):
    query = urlencode({"server": record["base"], "scope": "launch/patient patient/*.rs offline_access"})
    browser.go(f"{app_origin}/launch.html?{query}")
    browser.wait_for("document.querySelector('input[name=patient]') !== null")
    browser.evaluate(f"document.querySelector('input[name=patient]').value = '{record['b']}';"
                     "document.querySelector('button[value=approve]').click()")
    result = app_result(browser)
    assert result["patient"] == record["b"] and result["labs"] == [record["obs_b"]]
    assert result["refreshed"] and result["encounter"] is None


def test_standalone_launch_picks_the_patient_then_the_encounter(browser, record, app_origin):
    scope = "launch/patient launch/encounter patient/*.rs offline_access"
    browser.go(f"{app_origin}/launch.html?{urlencode({'server': record['base'], 'scope': scope})}")
    browser.wait_for("document.querySelector('input[name=patient]') !== null")
    browser.evaluate(f"document.querySelector('input[name=patient]').value = '{record['a']}';"
                     "document.querySelector('button[value=approve]').click()")
    browser.wait_for("document.querySelector('select[name=encounter]') !== null")
    offered = browser.evaluate("[...document.querySelectorAll('select[name=encounter] option')]"
                               ".map(o => o.value)")
    assert offered == [record["enc_a"]]  # the picked patient's stays only
    browser.evaluate("document.querySelector('button[value=approve]').click()")
    result = app_result(browser)
    assert result["patient"] == record["a"] and result["encounter"] == record["enc_a"]
    assert result["refreshed"]


def test_a_page_on_an_origin_not_allowed_cannot_read_the_answers(browser, record):
    """The same fetch from an origin the settings do not list: the browser blocks it (no
    Access-Control-Allow-Origin), which is what makes the allow list mean something."""
    browser.go("data:text/html,<title>elsewhere</title>")
    fetched = browser.evaluate(f"fetch('{record['base']}/metadata').then(r => r.status, e => 'blocked')")
    assert fetched == "blocked"
