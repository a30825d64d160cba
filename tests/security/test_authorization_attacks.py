"""Minting a token without a credential, on SQLite and PostgreSQL: every way in to `/auth/authorize` and
`/auth/token` that the hostile run of main b540c61 used, and their variants — no login, a consent POSTed
without the login's CSRF value, a patient outside the user's grants, another session's audience, unregistered
redirect URIs, a confidential client without its secret, PKCE verifiers outside RFC 7636, codes replayed or
used as launches, passwords guessed. Each attempt is counted; none may yield a code, a token, or a redirect to
a URI the client did not register. A legitimate launch still works (the control)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from services.fhir_api.auth.clients import register_client
from services.fhir_api.auth.launch import s256
from services.fhir_api.auth.users import add_user
from tests.fhir_api.conftest import patient, secured_api
from tests.fhir_api.smart_browser import PASSWORD, Browser, hidden_fields
from tests.security.tally import Tally, admin_headers, created

CALLBACK = "http://127.0.0.1:9/app/callback"
VERIFIER = "v" * 50
SECRET = "confidential-secret-of-the-app"


def _params(base: str, **extra: str) -> dict[str, str]:
    return {"response_type": "code", "client_id": "app", "redirect_uri": CALLBACK, "scope": "launch/patient "
            "patient/*.rs", "state": "s", "aud": base, "code_challenge": s256(VERIFIER),
            "code_challenge_method": "S256", **extra}


def _code(response: httpx.Response) -> str | None:
    location = response.headers.get("location", "")
    if response.status_code in (302, 303) and location.startswith(CALLBACK):
        return parse_qs(urlsplit(location).query).get("code", [None])[0]
    return None


def _offsite(response: httpx.Response, root: str) -> bool:
    """A redirect anywhere but this server's own pages and the registered callback."""
    location = response.headers.get("location", "")
    return response.is_redirect and not location.startswith((root, CALLBACK))


def _exchange(root: str, code: str, **form: str) -> httpx.Response:
    body = {"grant_type": "authorization_code", "code": code, "redirect_uri": CALLBACK, "client_id": "app",
            "code_verifier": VERIFIER, **form}
    return httpx.post(f"{root}/auth/token", data=body)


def _world(api) -> dict:
    admin = admin_headers(api)
    engine = api.store.engine
    ids = {name: created(api, patient(f"sec-{name}"), admin) for name in ("a", "b")}
    for name in ("s1", "s2"):
        ids[name] = httpx.post(f"{api.root}/sessions", json={}, headers=admin).json()["fhirBase"]
    register_client(engine, "app", "user/*.rs", public=True, redirect_uris=(CALLBACK,))
    register_client(engine, "conf", "user/*.rs", SECRET, redirect_uris=(CALLBACK,))
    add_user(engine, "ana", PASSWORD, None, "user/*.rs")
    add_user(engine, "bob", PASSWORD, [ids["a"]], "user/*.rs")
    return ids


def _authorize_attacks(api, ids: dict, tally: Tally) -> None:
    root, fhir = api.root, api.fhir
    url = f"{root}/auth/authorize"
    anonymous = httpx.Client(follow_redirects=False)
    for extra in ({}, {"scope": "user/*.cruds"}, {"aud": ids["s1"]}, {"launch": "forged"}):
        answer = anonymous.get(url, params=_params(fhir, **extra))
        tally.attempt("authorize without login", _code(answer) is not None, str(extra))
    for form in ({"decision": "approve", "patient": ids["b"]}, {"decision": "approve", "csrf": ""},
                 {"decision": "approve", "csrf": "guess", "patient": ids["a"]}):
        answer = anonymous.post(url, data={**_params(fhir), **form})
        tally.attempt("consent POST without login", _code(answer) is not None, str(form))
    bob = Browser("bob")
    page = bob.open(str(httpx.URL(url, params=_params(fhir))))
    assert page.status_code == 200 and bob.logins == 1, page.text  # bob sees only a: asked to confirm it
    good = hidden_fields(page)
    assert good["csrf"]
    without = {k: v for k, v in good.items() if k != "csrf"}
    for forged in ({**good, "csrf": ""}, {**good, "csrf": "x" * 32}, without):
        answer = bob.submit(url, {**forged, "decision": "approve", "patient": ids["a"]})
        tally.attempt("consent POST with a forged CSRF value", _code(answer) is not None)
    for other in (ids["b"], f"Patient/{ids['b']}", "nobody"):
        answer = bob.submit(url, {**good, "decision": "approve", "patient": other})
        tally.attempt("patient outside the user's grants", _code(answer) is not None, other)
    wide = bob.open(str(httpx.URL(url, params=_params(fhir, scope="user/*.rs"))))  # no launch/patient asked
    code = _code(bob.submit(url, {**hidden_fields(wide), "decision": "approve", "patient": ids["a"]}))
    token = _exchange(root, code).json() if code else {}
    tally.attempt("user/ scope beyond the user's grants", "user/" in token.get("scope", "user/")
                  or token.get("patient") != ids["a"], str(token.get("scope")))
    for aud in (ids["s1"], ids["s2"], "http://evil.example/fhir", f"{fhir}/", fhir.upper()):
        answer = bob.open(str(httpx.URL(url, params=_params(fhir, aud=aud))))
        if answer.status_code == 200:  # only the client's own base reaches the consent page
            answer = bob.submit(url, {**hidden_fields(answer), "decision": "approve", "patient": ids["a"]})
        minted = _code(answer) is not None and aud.rstrip("/") != fhir
        tally.attempt("audience other than the client's", minted, aud)
    for uri in ("http://evil.example/cb", CALLBACK + "x", CALLBACK.upper(), CALLBACK + "?next=http://evil",
                CALLBACK.replace("127.0.0.1", "127.0.0.1.evil.example"), "javascript:alert(1)"):
        for params in (_params(fhir, redirect_uri=uri), _params(fhir, redirect_uri=uri, response_type="x"),
                       _params(fhir, redirect_uri=uri, client_id="unknown")):
            answer = bob.open(str(httpx.URL(url, params=params)))
            escaped = _offsite(answer, root) or _code(answer) is not None
            tally.attempt("unregistered redirect URI", escaped, uri)


def _token_attacks(api, ids: dict, tally: Tally) -> None:
    root, fhir, url = api.root, api.fhir, f"{api.root}/auth/authorize"
    ana = Browser("ana")

    def code_for(client: str, challenge: str = s256(VERIFIER)) -> str:
        page = ana.open(str(httpx.URL(url, params=_params(fhir, client_id=client, code_challenge=challenge))))
        code = _code(ana.submit(url, {**hidden_fields(page), "decision": "approve", "patient": ids["a"]}))
        assert code, page.text
        return code

    confidential = code_for("conf")
    for form in ({}, {"client_secret": "wrong"}, {"client_secret": ""}, {"client_id": "app"}):
        answer = _exchange(root, confidential, client_id=form.pop("client_id", "conf"), **form)
        tally.attempt("confidential client without its secret", "access_token" in answer.json(), str(form))
    odd = VERIFIER[:-1] + "!"  # outside RFC 7636's alphabet, with its own matching challenge
    for verifier in (odd, "v" * 42, "v" * 129, VERIFIER + "\n"):
        answer = _exchange(root, code_for("app", s256(verifier)), code_verifier=verifier)
        tally.attempt("PKCE verifier outside RFC 7636", "access_token" in answer.json(), repr(verifier[-3:]))
    code = code_for("app")
    control = _exchange(root, code).json()  # the control: a legitimate launch, confined to a
    assert control.get("patient") == ids["a"]
    assert control["scope"].split() == ["launch/patient", "patient/*.rs"]
    bearer = {"Authorization": f"Bearer {control['access_token']}"}
    reads = httpx.get(f"{fhir}/Patient/{ids['a']}", headers=bearer)
    assert reads.status_code == 200
    tally.attempt("code replayed", "access_token" in _exchange(root, code).json())
    tally.attempt("code used as a launch", _code(ana.open(str(httpx.URL(url, params=_params(
        fhir, launch=code))))) is not None)
    for secret in ("", "x", SECRET):
        answer = httpx.post(f"{root}/auth/token", data={"grant_type": "client_credentials"},
                            auth=("app", secret))
        tally.attempt("client_credentials as a public app", "access_token" in answer.json(), secret)
    for guess in ("", "password", PASSWORD.upper(), PASSWORD + " "):
        answer = httpx.post(f"{root}/auth/login", data={"username": "ana", "password": guess},
                            follow_redirects=False)
        tally.attempt("password guessed", "rounds_login" in answer.headers.get("set-cookie", ""), guess)


def _auto_approve_attacks(api, ids: dict, tally: Tally) -> None:
    """ROUNDS_AUTH_AUTO_APPROVE approves only for the operator-configured user (here bob), never anyone."""
    settings, url = api.app.state.settings, f"{api.root}/auth/authorize"
    settings.auth_auto_approve = True
    try:
        answer = httpx.get(url, params=_params(api.fhir), follow_redirects=False)
        tally.attempt("auto-approve with no configured user", _code(answer) is not None)
        settings.auth_auto_approve_user = "bob"
        for other in (ids["b"], "nobody"):
            page = httpx.get(url, params=_params(api.fhir), follow_redirects=False)
            answer = httpx.post(url, data={**hidden_fields(page), "decision": "approve", "patient": other},
                                follow_redirects=False)
            minted = _code(answer) is not None
            tally.attempt("auto-approve for a patient the user does not see", minted, other)
    finally:
        settings.auth_auto_approve, settings.auth_auto_approve_user = False, None


@pytest.mark.parametrize("database_url", ["sqlite", "postgres"], indirect=True)
def test_no_token_without_a_credential(database_url: str) -> None:
    tally = Tally(f"authorization attacks ({database_url.split(':')[0]})")
    with secured_api(database_url) as api:
        ids = _world(api)
        _authorize_attacks(api, ids, tally)
        _token_attacks(api, ids, tally)
        _auto_approve_attacks(api, ids, tally)
    tally.assert_none(at_least=55)
