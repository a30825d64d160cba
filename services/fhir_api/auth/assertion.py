"""SMART Backend Services: a client authenticates at the token endpoint with a JWT it signed
(`private_key_jwt`, RFC 7523: `client_assertion_type=urn:ietf:params:oauth:client-assertion-type:jwt-bearer`),
checked against the public keys it registered (`rounds token client --jwks FILE|URL`).

The assertion must be signed with one of the algorithms SMART names (RS384, ES384; RS256/ES256/RS512/ES512
too), by a key of the client's JWKS (chosen by `kid`); `iss` and `sub` are the client id, `aud` this server's
token endpoint, `exp` at most five minutes ahead, and its `jti` is used once (kept with the revoked tokens,
revocation.py, until the assertion expires). A JWKS URL is read when needed, at most every five minutes
(`JWKS_TTL_S`), with a short timeout; only the URL the operator registered is ever fetched.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time

import httpx
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from joserfc.jws import extract_compact

from services.fhir_api.auth.clients import Client, find_client

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ALGORITHMS = ["RS384", "ES384", "RS256", "ES256", "RS512", "ES512"]
MAX_LIFETIME_S = 300
SKEW_S = 60
JWKS_TTL_S = 300
_fetched: dict[str, tuple[float, dict]] = {}
_lock = threading.Lock()


class BadAssertion(Exception):
    """The assertion does not authenticate its client (-> invalid_client)."""


def _keys(client: Client) -> KeySet:
    text = (client.jwks or "").strip()
    if text.startswith("{"):
        document = json.loads(text)
    else:
        with _lock:
            cached = _fetched.get(text)
        if cached is not None and time.monotonic() - cached[0] < JWKS_TTL_S:
            document = cached[1]
        else:
            try:
                response = httpx.get(text, timeout=5, follow_redirects=False)
                response.raise_for_status()
                document = response.json()
            except (httpx.HTTPError, ValueError) as exc:
                raise BadAssertion(f"the client's JWKS URL could not be read: {exc}") from exc
            with _lock:
                _fetched[text] = (time.monotonic(), document)
    # the keys only ever verify here: a `key_ops` copied from the private set (["sign"]) must not veto that
    keys = [{k: v for k, v in key.items() if k != "key_ops"} for key in document.get("keys", [])
            if isinstance(key, dict)]
    try:
        return KeySet.import_key_set({"keys": keys})
    except (JoseError, ValueError, TypeError, KeyError) as exc:
        raise BadAssertion("the client's registered JWKS is not usable") from exc


def authenticate_assertion(auth, assertion: str, token_endpoint: str) -> Client:
    """The client `assertion` authenticates; BadAssertion (with a reason) otherwise. Blocking."""
    try:
        unverified = json.loads(extract_compact(assertion.encode()).payload)
    except (JoseError, ValueError, TypeError) as exc:
        raise BadAssertion("client_assertion is not a signed JWT") from exc
    client_id = unverified.get("iss") if isinstance(unverified, dict) else None
    client = find_client(auth.store.engine, client_id) if isinstance(client_id, str) else None
    if client is None or not client.jwks:
        raise BadAssertion("the assertion's issuer is no client registered with keys (--jwks)")
    try:
        claims = jwt.decode(assertion, _keys(client), algorithms=ALGORITHMS).claims
        jwt.JWTClaimsRegistry(leeway=SKEW_S, iss={"essential": True, "value": client.client_id},
                              sub={"essential": True, "value": client.client_id},
                              aud={"essential": True, "value": token_endpoint},
                              exp={"essential": True}, jti={"essential": True}).validate(claims)
    except JoseError as exc:
        raise BadAssertion(f"invalid client_assertion: {exc.description or exc.error}") from exc
    if int(claims["exp"]) > time.time() + MAX_LIFETIME_S + SKEW_S:
        raise BadAssertion(f"the assertion may live at most {MAX_LIFETIME_S} s (exp)")
    spent = hashlib.sha256(f"assertion:{client.client_id}:{claims['jti']}".encode()).hexdigest()
    if auth.revocations.is_revoked(spent):
        raise BadAssertion("the assertion's jti was already used")
    auth.revocations.revoke(spent, int(claims["exp"]))
    return client
