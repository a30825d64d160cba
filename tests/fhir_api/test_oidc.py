"""OpenID Connect for SMART, introspection and revocation, driven by authlib 1.9 (its OAuth 2 client runs the
code flow with PKCE and a nonce) and checked with joserfc against the JWKS the discovery document names —
neither knows anything of this server beyond its discovery."""

from __future__ import annotations

import secrets
import time

import httpx
import pytest
from authlib.integrations.httpx_client import OAuth2Client
from joserfc import jwt
from joserfc.jwk import KeySet

from services.fhir_api.auth import revocation
from tests.fhir_api import test_smart_launch as smart_launch
from tests.fhir_api.conftest import assert_outcome
from tests.fhir_api.test_smart_launch import CALLBACK, browse, ehr_launch_url

# the SMART launch tests' server (auth on, user `ana`, public app `connector-app`), record and auto-approval
secured, record, auto_approve = smart_launch.secured, smart_launch.record, smart_launch.auto_approve


def launch(api, db, record, scope: str) -> tuple[dict, str, str]:
    """An EHR launch into the record's session by authlib's client: (token response, nonce, base)."""
    launched = httpx.URL(ehr_launch_url(api.root, db, record["session"], patient=record["a"]))
    base = launched.params["iss"]
    config = httpx.get(f"{base}/.well-known/smart-configuration").json()
    client = OAuth2Client("connector-app", redirect_uri=CALLBACK, scope=scope,
                          code_challenge_method="S256")
    verifier, nonce = secrets.token_urlsafe(48), secrets.token_urlsafe(16)
    url, _state = client.create_authorization_url(config["authorization_endpoint"], code_verifier=verifier,
                                                  nonce=nonce, aud=base, launch=launched.params["launch"])
    redirect = browse(url)
    assert redirect.status_code == 302, redirect.text
    token = client.fetch_token(config["token_endpoint"], authorization_response=redirect.headers["location"],
                               code_verifier=verifier)
    return dict(token), nonce, base


def test_discovery_names_what_works(secured):
    api, _ = secured
    smart = httpx.get(f"{api.root}/.well-known/smart-configuration").json()
    oidc = httpx.get(f"{api.root}/.well-known/openid-configuration").json()
    assert oidc["issuer"] == smart["issuer"] == api.root
    assert {"openid", "fhirUser"} <= set(smart["scopes_supported"])
    assert "profile" not in smart["scopes_supported"]
    assert "sso-openid-connect" in smart["capabilities"]
    for endpoint in ("jwks_uri", "introspection_endpoint", "revocation_endpoint"):
        assert httpx.options(smart[endpoint]).status_code != 404  # routed
    keys = httpx.get(smart["jwks_uri"]).json()["keys"]
    assert len(keys) == 1 and keys[0]["kty"] == "RSA" and keys[0]["alg"] == "RS256" and "d" not in keys[0]


def test_id_token_is_signed_by_the_published_key_and_names_the_user(secured, record, auto_approve):
    api, db = secured
    token, nonce, base = launch(api, db, record, "launch openid fhirUser patient/*.rs offline_access")
    keys = KeySet.import_key_set(httpx.get(f"{api.root}/auth/jwks").json())
    claims = jwt.decode(token["id_token"], keys, algorithms=["RS256"]).claims
    jwt.JWTClaimsRegistry(iss={"essential": True, "value": api.root}, aud={"essential": True,
                          "value": "connector-app"}, exp={"essential": True}).validate(claims)
    assert claims["sub"] == "ana" and claims["nonce"] == nonce
    assert claims["fhirUser"] == f"{base}/Practitioner/ana"
    refreshed = httpx.post(f"{api.root}/auth/token", data={"grant_type": "refresh_token", "client_id":
                           "connector-app", "refresh_token": token["refresh_token"]}).json()
    assert jwt.decode(refreshed["id_token"], keys).claims["nonce"] == nonce  # still the same login
    without, _, _ = launch(api, db, record, "launch patient/*.rs")
    assert "id_token" not in without  # no openid, no id_token


def test_introspection_and_revocation(secured, record, auto_approve, monkeypatch):
    api, db = secured
    monkeypatch.setattr(revocation, "REFRESH_S", 0.0)  # the table is read on every check here
    token, _, base = launch(api, db, record, "launch patient/*.rs offline_access")
    access, refresh = token["access_token"], token["refresh_token"]
    bearer = {"Authorization": f"Bearer {access}"}
    introspect = f"{api.root}/auth/introspect"
    assert httpx.post(introspect, data={"token": access}).status_code == 401  # who asks?
    described = httpx.post(introspect, data={"token": access}, headers=bearer).json()
    assert described["active"] and described["patient"] == record["a"]
    assert described["client_id"] == "connector-app" and "patient/*.rs" in described["scope"].split()
    assert described["exp"] > time.time()
    assert httpx.post(introspect, data={"token": "nonsense"}, headers=bearer).json() == {"active": False}
    assert httpx.post(introspect, data={"token": refresh}, headers=bearer).json()["active"]
    revoke = f"{api.root}/auth/revoke"
    other = httpx.post(revoke, data={"token": access, "client_id": "c"})
    assert other.status_code == 400 and "another client" in other.json()["error_description"]
    assert httpx.get(f"{base}/Patient/{record['a']}", headers=bearer).status_code == 200
    assert httpx.post(revoke, data={"token": access, "client_id": "connector-app"}).status_code == 200
    assert_outcome(httpx.get(f"{base}/Patient/{record['a']}", headers=bearer), 401)
    assert httpx.post(introspect, data={"token": refresh}, headers={"Authorization": "Basic x"}) \
        .status_code == 401
    assert httpx.post(revoke, data={"token": refresh, "client_id": "connector-app"}).status_code == 200
    refused = httpx.post(f"{api.root}/auth/token", data={
        "grant_type": "refresh_token", "refresh_token": refresh, "client_id": "connector-app"})
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant"
    assert httpx.post(revoke, data={"token": "unknown", "client_id": "connector-app"}).status_code == 200


@pytest.mark.parametrize("path", ["/auth/introspect", "/auth/revoke"])
def test_the_endpoints_need_a_form(secured, path):
    api, _ = secured
    answer = httpx.post(f"{api.root}{path}", content=b"\xff", headers={"Authorization": "Bearer x"})
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_request"
