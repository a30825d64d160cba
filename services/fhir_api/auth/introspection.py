"""The token endpoints beside `/auth/token`: introspection (RFC 7662, `POST /auth/introspect`), revocation
(RFC 7009, `POST /auth/revoke`), the id_token keys (`GET /auth/jwks`) and OpenID Connect discovery
(`GET /.well-known/openid-configuration`, the issuer being the server's root).

Introspection answers a registered client that authenticates (HTTP Basic or client_secret_post), or any
caller presenting a valid bearer token of its own; it tells `active` and, for an active token, its scope,
subject, client, expiry and SMART context (`patient`, and `fhirUser` is in the id_token, not here). Revocation
is the client's own: a confidential client authenticates, a public one names itself (`client_id`), and the
token must have been issued to it — or the caller presents the token itself as its bearer. An unknown or
already invalid token answers 200, as RFC 7009 §2.2 says.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from services.fhir_api.auth.clients import authenticate
from services.fhir_api.auth.launch import InvalidToken, refresh_claims
from services.fhir_api.auth.oidc import jwks
from services.fhir_api.auth.smart import app_client, client_credentials, discovery, oauth_error
from services.fhir_api.auth.tokens import Grant, verify
from services.fhir_api.http.errors import FhirHttpError
from services.fhir_api.http.links import external_root

router = APIRouter(tags=["auth"])
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


async def _form(request: Request) -> dict[str, str] | None:
    try:
        return dict(parse_qsl((await request.body()).decode(), keep_blank_values=True))
    except (UnicodeDecodeError, ValueError):
        return None


def _bearer(request: Request) -> str:
    kind, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if kind.lower() == "bearer" else ""


def _client_of(subject: str) -> str:
    """The client an access token was issued to, from its subject (`app:<id>`, `client:<id>`)."""
    kind, _, client = subject.partition(":")
    return client if kind in ("app", "client") else ""


def _access(auth, token: str) -> Grant | None:
    try:
        grant = verify(auth.key, token)
    except InvalidToken:
        return None
    return None if auth.revocations.is_revoked(grant.jti) else grant


def _refresh(auth, token: str) -> dict | None:
    try:
        claims = refresh_claims(auth.key, token)
    except InvalidToken:
        return None
    return None if auth.revocations.is_revoked(claims.get("jti", "")) else claims


def _describe(auth, token: str) -> dict:
    grant = _access(auth, token)
    if grant is not None:
        answer = {"active": True, "token_type": "Bearer", "scope": " ".join(map(str, grant.scopes)),
                  "sub": grant.subject, "exp": grant.expires, "iat": grant.issued, "iss": "rounds"}
        if _client_of(grant.subject):
            answer["client_id"] = _client_of(grant.subject)
        return answer | {k: v for k, v in (("patient", grant.patient), ("session", grant.session)) if v}
    claims = _refresh(auth, token)
    if claims is not None:
        return {"active": True, "token_type": "refresh_token", "scope": claims.get("scope", ""),
                "client_id": claims.get("client_id", ""), "exp": claims["exp"], "iat": claims["iat"]}
    return {"active": False}


def _unusable(auth) -> JSONResponse:
    """Both endpoints' answer when access control is off or the body is not a form."""
    return oauth_error("invalid_request", "access control is off on this server" if auth is None
                       else "the body must be application/x-www-form-urlencoded")


@router.post("/auth/introspect", summary="OAuth 2.0 token introspection (RFC 7662)")
async def introspect(request: Request) -> JSONResponse:
    auth, form = request.app.state.auth, await _form(request)
    if auth is None or form is None:
        return _unusable(auth)
    credentials = client_credentials(request, form)
    if credentials is not None:
        known = await run_in_threadpool(authenticate, auth.store.engine, *credentials)
        if known is None:
            return oauth_error("invalid_client", "unknown client or wrong secret", 401)
    elif not _bearer(request) or await run_in_threadpool(_access, auth, _bearer(request)) is None:
        return oauth_error("invalid_client", "introspection needs client authentication or a valid bearer "
                                             "token", 401)
    if not form.get("token"):
        return oauth_error("invalid_request", "token is required")
    return JSONResponse(await run_in_threadpool(_describe, auth, form["token"]), headers=NO_STORE)


def _revoke(auth, token: str, client_id: str, own: bool) -> str | None:
    """Revoke `token` for `client_id` (or for its own bearer: `own`); an error description, or None."""
    grant = _access(auth, token)
    if grant is not None:
        if not own and _client_of(grant.subject) != client_id:
            return "the token was issued to another client"
        auth.revocations.revoke(grant.jti, grant.expires)
        return None
    claims = _refresh(auth, token)
    if claims is not None:
        if not own and claims.get("client_id") != client_id:
            return "the token was issued to another client"
        auth.revocations.revoke(claims.get("jti", ""), int(claims["exp"]))
    return None  # unknown, expired or already revoked: nothing to do (RFC 7009 §2.2)


@router.post("/auth/revoke", summary="OAuth 2.0 token revocation (RFC 7009)")
async def revoke(request: Request) -> JSONResponse:
    auth, form = request.app.state.auth, await _form(request)
    if auth is None or form is None:
        return _unusable(auth)
    if not form.get("token"):
        return oauth_error("invalid_request", "token is required")
    own = _bearer(request) == form["token"]
    if not own:
        refused = await app_client(request, auth, form)
        if refused is not None:
            return refused
    error = await run_in_threadpool(_revoke, auth, form["token"], form.get("client_id", ""), own)
    if error is not None:
        return oauth_error("invalid_request", error)
    return JSONResponse({}, headers=NO_STORE)


@router.get("/auth/jwks", summary="the keys that sign id_tokens (JWKS)")
async def keys(request: Request) -> JSONResponse:
    auth = request.app.state.auth
    if auth is None or auth.id_key is None:
        return JSONResponse({"keys": []})
    return JSONResponse(jwks(auth.id_key), headers={"Cache-Control": "max-age=3600"})


@router.get("/.well-known/openid-configuration", summary="OpenID Connect discovery")
async def openid_configuration(request: Request) -> JSONResponse:
    if request.app.state.auth is None:
        raise FhirHttpError(404, "access control is off on this server (ROUNDS_AUTH): no OpenID provider",
                            code="not-found")
    return JSONResponse(discovery(external_root(request, request.app.state.settings)))
