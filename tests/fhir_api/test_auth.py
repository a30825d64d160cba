"""Access control over HTTP (ROUNDS_AUTH=on): tokens, scopes, session tokens, patient confinement, discovery.

The clients are fhirpy (and httpx where a status or header is the point), each passing its bearer token.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator

import httpx
import pytest
from fhirpy import SyncFHIRClient
from fhirpy.base.exceptions import AuthorizationError, ForbiddenError

from rounds.migrate import upgrade
from rounds.settings import Settings
from services.fhir_api.app import create_app
from services.fhir_api.auth.clients import register_client
from services.fhir_api.auth.scopes import parse_scopes
from services.fhir_api.auth.tokens import issue
from tests.fhir_api.conftest import LiveApi, assert_outcome, observation, patient, start_live, token_claims
from tests.wiring import store_on


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveApi]:
    url = f"sqlite:///{tmp_path_factory.mktemp('auth') / 'auth.sqlite'}"
    upgrade(url)
    store = store_on(url)
    app = create_app(Settings(database_url=url, auth=True), store)
    api, server, thread = start_live(app, store)
    yield api
    server.should_exit = True
    thread.join(timeout=10)


LATER = "2170-01-01T00:00:00Z"


def token(api: LiveApi, scope: str, **claims) -> str:
    expires_in = claims.pop("expires_in", 600)
    return issue(api.app.state.auth.key, parse_scopes(scope), expires_in=expires_in, **claims)


def bearer(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}


def fhir(base: str, value: str) -> SyncFHIRClient:
    return SyncFHIRClient(base, authorization=f"Bearer {value}")


@pytest.fixture(scope="module")
def admin(secured: LiveApi) -> str:
    return token(secured, "system/*.cruds")


@pytest.fixture(scope="module")
def two_patients(secured: LiveApi, admin: str) -> dict:
    """Two patients in the shared record, each with one lab (created with the managing token via fhirpy)."""
    client = fhir(secured.fhir, admin)
    ids = {}
    for name in ("a", "b"):
        p = client.resource("Patient", **patient(f"auth-{name}"))
        p.save()
        obs = client.resource("Observation", **observation(p.id, f"auth-{name}", "2150-01-01T00:00:00Z"))
        obs.save()
        ids[name], ids[f"obs_{name}"] = p.id, obs.id
    return ids


def open_session(api: LiveApi, admin: str, **body) -> dict:
    r = httpx.post(f"{api.root}/sessions", json={"now": "2180-01-01T00:00:00Z", **body},
                   headers=bearer(admin))
    assert r.status_code == 201, r.text
    return r.json()




def test_no_token_is_401_with_challenge_but_metadata_and_discovery_are_public(secured):
    r = httpx.get(f"{secured.fhir}/Patient")
    assert_outcome(r, 401)
    assert r.headers["www-authenticate"].startswith('Bearer realm="rounds"')
    meta = httpx.get(f"{secured.fhir}/metadata")
    assert meta.status_code == 200
    security = meta.json()["rest"][0]["security"]
    assert security["service"][0]["coding"][0]["code"] == "SMART-on-FHIR"
    for path in ("/.well-known/smart-configuration", "/fhir/.well-known/smart-configuration"):
        doc = httpx.get(secured.root + path).json()
        assert doc["token_endpoint"] == f"{secured.root}/auth/token"
        assert "client_credentials" in doc["grant_types_supported"] and "permission-v2" in doc["capabilities"]


def test_expired_tampered_and_malformed_tokens_are_401(secured, admin):
    expired = token(secured, "system/*.cruds", expires_in=-60)
    head, body, sig = admin.split(".")
    claims = base64.urlsafe_b64decode(body + "==").replace(b"system/*.cruds", b"system/*.cruds ")
    forged = ".".join([head, base64.urlsafe_b64encode(claims).rstrip(b"=").decode(), sig])
    other_key = issue(__import__("joserfc.jwk", fromlist=["OctKey"]).OctKey.import_key(b"k" * 32),
                      parse_scopes("system/*.cruds"), expires_in=600)
    for bad, why in ((expired, "expired"), (forged, "signature"), (other_key, "signature"),
                     ("not.a.jwt", ""), ("x", "")):
        r = httpx.get(f"{secured.fhir}/Patient", headers=bearer(bad))
        assert_outcome(r, 401)
        assert 'error="invalid_token"' in r.headers["www-authenticate"], r.headers
        assert why in r.headers["www-authenticate"]
    assert_outcome(httpx.get(f"{secured.fhir}/Patient", headers={"Authorization": f"Basic {admin}"}), 401)
    with pytest.raises(AuthorizationError):
        fhir(secured.fhir, expired).resources("Patient").fetch()


def test_scopes_decide_what_a_token_may_do(secured, two_patients):
    reader = fhir(secured.fhir, token(secured, "system/*.rs"))
    assert reader.resources("Patient").search(_id=two_patients["a"]).fetch()[0].id == two_patients["a"]
    obs_only = token(secured, "user/Observation.rs")
    assert httpx.get(f"{secured.fhir}/Observation/{two_patients['obs_a']}", headers=bearer(obs_only)) \
        .status_code == 200
    r = httpx.get(f"{secured.fhir}/Patient/{two_patients['a']}", headers=bearer(obs_only))
    assert_outcome(r, 403)
    assert 'error="insufficient_scope"' in r.headers["www-authenticate"]
    with pytest.raises(ForbiddenError):
        reader.resource("Patient", **patient("auth-ro")).save()  # no c
    search_only = token(secured, "system/Patient.s")
    assert_outcome(httpx.get(f"{secured.fhir}/Patient/{two_patients['a']}", headers=bearer(search_only)), 403)
    assert httpx.get(f"{secured.fhir}/Patient", headers=bearer(search_only)).status_code == 200
    # managing sessions takes an unconfined token with the verb
    assert_outcome(httpx.post(f"{secured.root}/sessions", json={}, headers=bearer(obs_only)), 403)
    assert_outcome(httpx.post(f"{secured.root}/sessions", json={}, headers=bearer(token(secured,
                   "system/*.rs"))), 403)


def test_session_token_reaches_its_sandbox_only(secured, admin, two_patients):
    mine, other = open_session(secured, admin), open_session(secured, admin)
    assert mine["accessToken"] and mine["accessToken"] != other["accessToken"]
    sandbox = fhir(mine["fhirBase"], mine["accessToken"])
    assert sandbox.resources("Patient").search(_id=two_patients["b"]).fetch()[0].id == two_patients["b"]
    written = sandbox.resource("Observation", **observation(two_patients["a"], "auth-w", LATER))
    written.save()  # read + write on the sandbox
    sandbox.resource("Observation", id=written.id).delete()
    for base in (secured.fhir, other["fhirBase"]):  # nothing on /fhir or another session, via fhirpy
        with pytest.raises(ForbiddenError):
            fhir(base, mine["accessToken"]).resources("Patient").fetch()
        with pytest.raises(ForbiddenError):
            fhir(base, mine["accessToken"]).resource("Patient", **patient("auth-x")).save()
    headers = bearer(mine["accessToken"])
    for method, url in (("GET", f"{secured.fhir}/Patient/{two_patients['a']}"),
                        ("POST", f"{secured.fhir}/Patient"),
                        ("DELETE", f"{secured.fhir}/Patient/{two_patients['a']}"),
                        ("GET", f"{other['fhirBase']}/Observation"),
                        ("POST", f"{other['fhirBase']}"),
                        ("DELETE", f"{secured.root}/sessions/{other['id']}"),
                        ("GET", f"{secured.root}/sessions/{mine['id']}/writes"),
                        ("POST", f"{secured.root}/sessions")):
        r = httpx.request(method, url, headers=headers, json=patient("auth-y") if method == "POST" else None)
        assert_outcome(r, 403)
    assert httpx.get(f"{secured.fhir}/Patient/{two_patients['a']}", headers=bearer(admin)).status_code == 200
    theirs = httpx.get(f"{other['fhirBase']}/Observation", headers=bearer(other["accessToken"]))
    assert theirs.status_code == 200


def test_patient_session_token_stays_in_the_patients_compartment(secured, admin, two_patients):
    a, b = two_patients["a"], two_patients["b"]
    s = open_session(secured, admin, patient=f"Patient/{a}")
    assert s["patient"] == f"Patient/{a}"
    client = fhir(s["fhirBase"], s["accessToken"])
    headers, base = bearer(s["accessToken"]), s["fhirBase"]
    assert [p.id for p in client.resources("Patient").fetch()] == [a]
    assert {o.id for o in client.resources("Observation").fetch()} == {two_patients["obs_a"]}
    assert client.resources("Observation").search(subject=f"Patient/{b}").fetch() == []
    assert client.resources("Patient").search(_id=b).fetch() == []
    assert client.reference("Patient", a).to_resource().id == a
    assert client.reference("Observation", two_patients["obs_a"]).to_resource().id == two_patients["obs_a"]
    for call in (lambda: client.reference("Patient", b).to_resource(),
                 lambda: client.reference("Observation", two_patients["obs_b"]).to_resource(),
                 lambda: client.resource("Observation", **observation(b, "auth-z", LATER)).save()):
        with pytest.raises(ForbiddenError):
            call()
    mine = client.resource("Observation", **observation(a, "auth-z", LATER))
    mine.save()  # writes about the patient are allowed
    assert_outcome(httpx.get(f"{base}/Patient/{b}", headers=headers), 403)
    assert_outcome(httpx.get(f"{base}/Patient/{b}/$everything", headers=headers), 403)
    assert httpx.get(f"{base}/Patient/{a}/$everything", headers=headers).status_code == 200
    assert_outcome(httpx.delete(f"{base}/Observation/{two_patients['obs_b']}", headers=headers), 403)
    assert_outcome(httpx.patch(f"{base}/Observation/{mine.id}", headers=headers,
                               json=[{"op": "replace", "path": "/subject/reference",
                                      "value": f"Patient/{b}"}]), 403)
    assert_outcome(httpx.put(f"{base}/Observation/{mine.id}", headers=headers,
                             json={**observation(b, "auth-z", LATER), "id": mine.id}), 403)
    # the shared copy of the other patient's lab is untouched
    assert httpx.get(f"{secured.fhir}/Observation/{two_patients['obs_b']}", headers=bearer(admin)) \
        .json()["subject"]["reference"] == f"Patient/{b}"


def test_a_patient_session_carries_its_encounter_as_launch_context(secured, admin, two_patients):
    """As in a SMART EHR launch the stay is context: named in the answer and the token, checked to be a stay
    of the patient the clock already shows, never a filter on the patient's other stays."""
    a, b = two_patients["a"], two_patients["b"]
    client = fhir(secured.fhir, admin)

    def stay(pid: str, start: str) -> str:
        e = client.resource("Encounter", status="finished", subject={"reference": f"Patient/{pid}"},
                            period={"start": start}, **{"class": {"code": "IMP"}})
        e.save()
        return e.id

    own, theirs, later = stay(a, "2150-01-01T00:00:00Z"), stay(b, "2150-01-01T00:00:00Z"), \
        stay(a, "2190-01-01T00:00:00Z")
    s = open_session(secured, admin, patient=f"Patient/{a}", encounter=f"Encounter/{own}")
    assert s["encounter"] == f"Encounter/{own}"
    claims = token_claims(s["accessToken"])
    assert (claims["patient"], claims["encounter"]) == (a, own)
    # context, not a filter: the patient's lab of no encounter stays readable
    assert {o.id for o in fhir(s["fhirBase"], s["accessToken"]).resources("Observation").fetch()} \
        == {two_patients["obs_a"]}
    for body in ({"patient": f"Patient/{a}", "encounter": f"Encounter/{theirs}"},  # another patient's stay
                 {"patient": f"Patient/{a}", "encounter": f"Encounter/{later}"},  # a stay after the clock
                 {"patient": f"Patient/{a}", "encounter": "Encounter/nowhere"},
                 {"encounter": f"Encounter/{own}"},  # a stay without its patient
                 {"patient": f"Patient/{a}", "encounter": 7}):
        r = httpx.post(f"{secured.root}/sessions", json={"now": "2180-01-01T00:00:00Z", **body},
                       headers=bearer(admin))
        assert_outcome(r, 400)
    assert "encounter" not in open_session(secured, admin, patient=f"Patient/{a}")


def test_session_for_unknown_patient_is_400(secured, admin):
    r = httpx.post(f"{secured.root}/sessions", json={"patient": "Patient/nobody-here"}, headers=bearer(admin))
    assert_outcome(r, 400)
    assert_outcome(httpx.post(f"{secured.root}/sessions", json={"patient": 7}, headers=bearer(admin)), 400)


def test_client_credentials_token_endpoint(secured):
    engine = secured.store.engine
    secret = register_client(engine, "connector", "system/*.rs")
    r = httpx.post(f"{secured.root}/auth/token", data={"grant_type": "client_credentials",
                                                        "scope": "system/Observation.rs"},
                   auth=("connector", secret))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["token_type"] == "Bearer" and body["scope"] == "system/Observation.rs"
    assert body["expires_in"] > 0
    got = httpx.get(f"{secured.fhir}/Observation", headers=bearer(body["access_token"]))
    assert got.status_code == 200
    assert_outcome(httpx.get(f"{secured.fhir}/Patient", headers=bearer(body["access_token"])), 403)
    form = httpx.post(f"{secured.root}/auth/token", data={"grant_type": "client_credentials",
                                                           "client_id": "connector", "client_secret": secret})
    assert form.status_code == 200 and form.json()["scope"] == "system/*.rs"
    wrong = httpx.post(f"{secured.root}/auth/token", data={"grant_type": "client_credentials"},
                       auth=("connector", "nope"))
    assert wrong.status_code == 401 and wrong.json()["error"] == "invalid_client"
    more = httpx.post(f"{secured.root}/auth/token", auth=("connector", secret),
                      data={"grant_type": "client_credentials", "scope": "system/*.cruds"})
    assert more.status_code == 200 and more.json()["scope"] == "system/*.rs"  # narrowed to what it may have
    writes = httpx.post(f"{secured.root}/auth/token", auth=("connector", secret),
                        data={"grant_type": "client_credentials", "scope": "system/*.cud"})
    assert writes.status_code == 400 and writes.json()["error"] == "invalid_scope"  # nothing of it allowed
    grant = httpx.post(f"{secured.root}/auth/token", data={"grant_type": "password"},
                       auth=("connector", secret))
    assert grant.json()["error"] == "unsupported_grant_type"


def test_auth_off_ignores_tokens_and_hands_none_out(api):
    s = httpx.post(f"{api.root}/sessions", json={}).json()
    assert "accessToken" not in s
    assert httpx.get(f"{api.fhir}/Patient", headers=bearer("garbage")).status_code == 200
    assert "security" not in httpx.get(f"{api.fhir}/metadata").json()["rest"][0]


def test_the_key_is_generated_once_and_shared_by_server_and_cli(database_url):
    """No ROUNDS_AUTH_KEY: the first user of the database generates the key; the CLI's token verifies on the
    server built afterwards (and a configured key wins over the stored one)."""
    from typer.testing import CliRunner

    from rounds.cli import app as cli
    from services.fhir_api.auth.tokens import InvalidToken, signing_key, verify

    printed = CliRunner().invoke(cli, ["token", "issue", "--scope", "system/*.rs", "--database-url",
                                       database_url, "--expires-in", "60"])
    assert printed.exit_code == 0, printed.output
    store = store_on(database_url)
    try:
        app = create_app(Settings(database_url=database_url, auth=True), store)
        assert verify(app.state.auth.key, printed.output.strip()).scopes == parse_scopes("system/*.rs")
        assert signing_key(store.engine, None).as_dict() == app.state.auth.key.as_dict()  # stable
        configured = signing_key(store.engine, "c" * 32)
        with pytest.raises(InvalidToken):
            verify(configured, printed.output.strip())
        with pytest.raises(ValueError):
            signing_key(store.engine, "short")
    finally:
        store.engine.dispose()
    bad = CliRunner().invoke(cli, ["token", "issue", "--scope", "everything", "--database-url", database_url])
    assert bad.exit_code != 0


def test_compose_turns_auth_on_for_the_api_and_its_clients():
    from pathlib import Path

    import yaml

    services = yaml.safe_load((Path(__file__).parents[2] / "docker-compose.yml").read_text())["services"]
    for name in ("api", "scorer", "simulator"):
        assert services[name]["environment"]["ROUNDS_AUTH"] == "on", name
    assert Settings().auth is False  # the embedded default stays open


@pytest.mark.postgres
def test_session_and_patient_confinement_on_postgres(postgres_url):
    upgrade(postgres_url)
    store = store_on(postgres_url)
    app = create_app(Settings(database_url=postgres_url, auth=True), store)
    api, server, thread = start_live(app, store)
    try:
        admin = token(api, "system/*.cruds")
        shared = fhir(api.fhir, admin)
        ids = {}
        for name in ("a", "b"):
            p = shared.resource("Patient", **patient(f"pg-{name}"))
            p.save()
            shared.resource("Observation", **observation(p.id, f"pg-{name}", "2150-01-01T00:00:00Z")).save()
            ids[name] = p.id
        s = open_session(api, admin, patient=f"Patient/{ids['a']}")
        confined = fhir(s["fhirBase"], s["accessToken"])
        assert {o["subject"]["reference"] for o in confined.resources("Observation").fetch_all()} == \
            {f"Patient/{ids['a']}"}
        with pytest.raises(ForbiddenError):
            confined.reference("Patient", ids["b"]).to_resource()
        with pytest.raises(ForbiddenError):
            fhir(api.fhir, s["accessToken"]).resources("Patient").fetch()
        with pytest.raises(AuthorizationError):
            fhir(s["fhirBase"], s["accessToken"][:-3] + "abc").resources("Patient").fetch()
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        store.engine.dispose()
