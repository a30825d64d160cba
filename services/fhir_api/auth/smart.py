"""SMART on FHIR discovery and the token endpoint: client credentials (a shared secret), and for apps launched
through SMART App Launch (authorize.py) the authorization_code (PKCE) and refresh_token grants (grants.py).

`/.well-known/smart-configuration` (at the root and under every FHIR base) is public and is answered by the
auth middleware itself, ahead of the FHIR routes that would read `.well-known` as a resource type.
`POST /auth/token` (form: grant_type=client_credentials, scope; the client's id and secret as HTTP Basic or
`client_id` / `client_secret` form fields) answers an OAuth token response (RFC 6749 §5.1) or an OAuth error
(§5.2) — these are OAuth documents, not OperationOutcomes.
"""

from __future__ import annotations

import base64
import binascii
from urllib.parse import parse_qsl

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from services.fhir_api.auth.assertion import ASSERTION_TYPE, BadAssertion, authenticate_assertion
from services.fhir_api.auth.clients import authenticate, find_client
from services.fhir_api.auth.grants import GrantError, exchange_code, refresh
from services.fhir_api.auth.launch import InvalidToken, open_refresh
from services.fhir_api.auth.scopes import ScopeError, format_scopes, narrow, parse_scopes
from services.fhir_api.auth.throttle import throttled_client_auth
from services.fhir_api.http.links import external_root

router = APIRouter(tags=["auth"])
SCOPES_SUPPORTED = ["system/*.cruds", "system/*.rs", "system/*.read", "user/*.cruds", "user/*.rs",
                    "patient/*.cruds", "patient/*.rs"]
SECURITY_SERVICE = "http://terminology.hl7.org/CodeSystem/restful-security-service"
# What works here, and nothing else (no POST to /auth/authorize as a request, its POST is the consent form's
# answer; OpenID Connect: openid and fhirUser, no `profile`)
CAPABILITIES = ["client-confidential-symmetric", "client-confidential-asymmetric", "client-public",
                "launch-ehr", "launch-standalone",
                "context-ehr-patient", "context-ehr-encounter", "context-standalone-patient",
                "context-standalone-encounter",
                "permission-offline", "permission-online", "permission-v2", "permission-v1",
                "permission-patient", "permission-user", "sso-openid-connect"]
GRANT_TYPES = ["authorization_code", "refresh_token", "client_credentials"]


def discovery(root: str) -> dict:
    return {
        "issuer": root,
        "authorization_endpoint": f"{root}/auth/authorize",
        "token_endpoint": f"{root}/auth/token",
        "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post",
                                                  "private_key_jwt"],
        "token_endpoint_auth_signing_alg_values_supported": ["RS384", "ES384"],
        "grant_types_supported": GRANT_TYPES,
        "code_challenge_methods_supported": ["S256"],
        "scopes_supported": [*SCOPES_SUPPORTED, "launch", "launch/patient", "launch/encounter",
                             "offline_access",
                             "online_access", "openid", "fhirUser"],
        "response_types_supported": ["code"],
        "capabilities": CAPABILITIES,
        "jwks_uri": f"{root}/auth/jwks",
        "id_token_signing_alg_values_supported": ["RS256"],
        "subject_types_supported": ["public"],
        "claims_supported": ["iss", "sub", "aud", "exp", "iat", "nonce", "fhirUser"],
        "introspection_endpoint": f"{root}/auth/introspect",
        "revocation_endpoint": f"{root}/auth/revoke",
    }


def security(root: str, cors: bool) -> dict:
    """The CapabilityStatement's rest.security when auth is on; `cors`: browser apps on other origins may
    call (http/cors.py)."""
    return {
        "cors": cors,
        "service": [{"coding": [{"system": SECURITY_SERVICE, "code": "SMART-on-FHIR"}],
                     "text": "OAuth2 bearer tokens with SMART scopes"}],
        "extension": [{"url": "http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris",
                       "extension": [{"url": "token", "valueUri": f"{root}/auth/token"},
                                     {"url": "authorize", "valueUri": f"{root}/auth/authorize"}]}],
        "description": "Bearer tokens (HS256 JWT) with SMART v2 scopes; POST /sessions returns a token "
                       "valid only on that session's FHIR base. Discovery: /.well-known/smart-configuration.",
    }


def oauth_error(error: str, description: str, status: int = 400) -> JSONResponse:
    headers = {"WWW-Authenticate": 'Basic realm="rounds"'} if status == 401 else None
    return JSONResponse({"error": error, "error_description": description}, status, headers=headers,
                        media_type="application/json")


def client_credentials(request: Request, form: dict[str, str]) -> tuple[str, str] | None:
    header = request.headers.get("authorization", "")
    if header.lower().startswith("basic "):
        try:
            client_id, _, secret = base64.b64decode(header[6:].strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return client_id, secret
    if "client_id" in form and "client_secret" in form:
        return form["client_id"], form["client_secret"]
    return None


async def app_client(request: Request, auth, form: dict[str, str]) -> JSONResponse | None:
    """Hold the code and refresh grants to a registered client: a confidential one must authenticate
    (HTTP Basic or client_secret_post), a public one names itself (`client_id`) and proves the code with
    PKCE. Leaves the authenticated id in `form["client_id"]`; an OAuth error answer otherwise."""
    credentials = client_credentials(request, form)
    client_id = credentials[0] if credentials else form.get("client_id", "") or _refreshed_by(auth, form)
    client = await run_in_threadpool(find_client, auth.store.engine, client_id) if client_id else None
    if client is None:
        return oauth_error("invalid_client", "unknown client", 401)
    if client.confidential and (credentials is None or await run_in_threadpool(
            authenticate, auth.store.engine, *credentials) is None):
        return oauth_error("invalid_client", "this client is confidential: it must authenticate "
                                              "(client_secret_basic or client_secret_post)", 401)
    form["client_id"] = client_id
    return None


def _refreshed_by(auth, form: dict[str, str]) -> str:
    """The client a refresh token was issued to: a public client need not name itself on a refresh
    (RFC 6749 §6 asks only confidential ones to authenticate; SMART's JavaScript client sends no client_id).
    Empty when there is no valid refresh token (grants.refresh then says why)."""
    if form.get("grant_type") != "refresh_token" or not form.get("refresh_token"):
        return ""
    try:
        return open_refresh(auth.key, form["refresh_token"]).client_id
    except InvalidToken:
        return ""


@router.post("/auth/token", summary="OAuth2 token endpoint (client_credentials)")
@throttled_client_auth  # failed client authentications: 429 past ROUNDS_AUTH_FAILED_ATTEMPTS (throttle.py)
async def token(request: Request) -> JSONResponse:
    auth = request.app.state.auth
    if auth is None:
        return oauth_error("unsupported_grant_type", "access control is off on this server (ROUNDS_AUTH)")
    body = await request.body()
    try:
        form = dict(parse_qsl(body.decode(), keep_blank_values=True))
    except (UnicodeDecodeError, ValueError):
        return oauth_error("invalid_request", "the body must be application/x-www-form-urlencoded")
    grant_type = form.get("grant_type")
    if grant_type in ("authorization_code", "refresh_token"):
        refused = await app_client(request, auth, form)
        if refused is not None:
            return refused
        try:
            root = external_root(request, auth.settings)
            answer = await run_in_threadpool(exchange_code, auth, auth.codes, form, root) \
                if grant_type == "authorization_code" else await run_in_threadpool(refresh, auth, form, root)
        except GrantError as exc:
            return oauth_error(exc.error, exc.description)
        return JSONResponse(answer, headers={"Cache-Control": "no-store", "Pragma": "no-cache"})
    if grant_type != "client_credentials":
        return oauth_error("unsupported_grant_type", f"grant_type must be one of {', '.join(GRANT_TYPES)}")
    if form.get("client_assertion_type") == ASSERTION_TYPE:  # SMART Backend Services (assertion.py)
        endpoint = f"{external_root(request, auth.settings)}/auth/token"
        try:
            client = await run_in_threadpool(authenticate_assertion, auth, form.get("client_assertion", ""),
                                             endpoint)
        except BadAssertion as exc:
            return oauth_error("invalid_client", str(exc), 401)
        credentials, allowed = (client.client_id, ""), parse_scopes(client.scope)
    else:
        credentials = client_credentials(request, form)
        if credentials is None:
            return oauth_error("invalid_client", "client authentication is required", 401)
        engine = getattr(auth.store, "engine", None)
        allowed = await run_in_threadpool(authenticate, engine, *credentials) if engine is not None else None
        if allowed is None:
            return oauth_error("invalid_client", "unknown client or wrong secret", 401)
    try:
        requested = parse_scopes(form["scope"]) if form.get("scope") else allowed
    except ScopeError as exc:
        return oauth_error("invalid_scope", str(exc))
    granted = narrow(requested, allowed)
    if not granted:
        return oauth_error("invalid_scope", "none of the requested scopes is allowed for this client")
    lifetime = auth.settings.auth_token_seconds
    return JSONResponse({"access_token": auth.token(granted, f"client:{credentials[0]}", lifetime),
                         "token_type": "Bearer", "expires_in": lifetime, "scope": format_scopes(granted)},
                        headers={"Cache-Control": "no-store", "Pragma": "no-cache"})
