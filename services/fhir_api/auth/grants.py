"""What an app launched through SMART App Launch is granted, and the token endpoint's two user-facing
grants (authorization_code with PKCE, refresh_token).

Scopes are confined as a session's own token is: every token carries the launch's `session` (valid only on
that sandbox's base, or only on `/fhir` when launched on the shared record), and with a patient in context
every resource scope becomes a `patient/` scope of that patient, so the app reads that compartment and
nothing else. `system/` scopes are never granted to an app a user launches (they are the client-credentials
grant's).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from services.fhir_api.auth.clients import Client
from services.fhir_api.auth.launch import (
    Authorization,
    CodeLedger,
    InvalidToken,
    issue_refresh,
    open_code,
    open_refresh,
    pkce_matches,
)
from services.fhir_api.auth.oidc import fhir_user, id_token
from services.fhir_api.auth.scopes import ScopeError, parse_scope, parse_scopes, within
from services.fhir_api.auth.users import User

REFRESH_SCOPES = frozenset({"offline_access", "online_access"})
IDENTITY_SCOPES = frozenset({"openid", "fhirUser"})  # OpenID Connect (oidc.py): an id_token
LAUNCH_SCOPES = frozenset({"launch", "launch/patient", "launch/encounter"}) | REFRESH_SCOPES | IDENTITY_SCOPES


class GrantError(Exception):
    """An OAuth error of the token endpoint (RFC 6749 §5.2)."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error, self.description = error, description


def grant_scopes(requested: str, patient: str | None, user: User | None = None,
                 client: Client | None = None) -> str:
    """The scopes granted for `requested` (ScopeError on a malformed one, or when nothing is left):
    the launch, refresh and identity scopes that work here as asked (`profile` is not offered),
    resource scopes confined to the patient when there is one, `system/` dropped, and every resource scope
    within the user's ceiling and the client's registered scopes. Without a patient `user/` scopes are granted
    only to a user who sees every patient (authorize.py puts a patient in context for the others)."""
    granted: list[str] = []
    resources = 0
    for text in requested.split():
        scope = parse_scope(text)
        if scope is None:
            if text in LAUNCH_SCOPES and text not in granted:
                granted.append(text)
            continue
        if scope.context == "system":
            continue
        if patient is not None:
            scope = replace(scope, context="patient")
        elif scope.context == "patient" or (user is not None and user.patients is not None):
            continue  # no patient in context: a patient/ scope would allow nothing
        kept = [scope]
        for ceiling in (user.ceiling if user else None, parse_scopes(client.scope) if client else None):
            if ceiling is not None:
                kept = [narrowed for one in kept for narrowed in within(one, ceiling)]
        for one in kept:
            if str(one) not in granted:
                granted.append(str(one))
                resources += 1
    if not resources:
        raise ScopeError("none of the requested resource scopes may be granted to this user and client")
    return " ".join(granted)


def token_response(auth: Any, grant: Authorization, root: str) -> dict:
    """The token response (SMART App Launch §token response): the access token, its context, when
    offline_access or online_access was granted a refresh token, and with `openid` an id_token (issuer
    `root`, the server's)."""
    context = grant.context
    lifetime = auth.settings.auth_token_seconds
    access = auth.token(parse_scopes(grant.scope), f"app:{grant.client_id}", lifetime,
                        session=context.session, patient=context.patient)
    body: dict = {"access_token": access, "token_type": "Bearer", "expires_in": lifetime,
                  "scope": grant.scope}
    if context.patient is not None:
        body["patient"] = context.patient
    if context.encounter is not None:
        body["encounter"] = context.encounter
    if REFRESH_SCOPES & set(grant.scope.split()):
        body["refresh_token"] = issue_refresh(auth.key, grant, auth.settings.auth_session_token_seconds)
    scopes = set(grant.scope.split())
    if "openid" in scopes and grant.user and auth.id_key is not None:
        base = f"{root}/sessions/{context.session}/fhir" if context.session else f"{root}/fhir"
        who = fhir_user(base, grant.user) if "fhirUser" in scopes else None
        body["id_token"] = id_token(auth.id_key, issuer=root, user=grant.user, client_id=grant.client_id,
                                    lifetime=lifetime, nonce=grant.nonce, fhir_user_url=who)
    return body


def exchange_code(auth: Any, ledger: CodeLedger, form: dict[str, str], root: str) -> dict:
    """grant_type=authorization_code: the code, the same client and redirect URI, the PKCE verifier."""
    for name in ("code", "redirect_uri", "client_id", "code_verifier"):
        if not form.get(name):
            raise GrantError("invalid_request", f"{name} is required")
    try:
        grant = open_code(auth.key, form["code"])
    except InvalidToken as exc:
        raise GrantError("invalid_grant", f"invalid authorization code: {exc}") from exc
    if grant.client_id != form["client_id"] or grant.redirect_uri != form["redirect_uri"]:
        raise GrantError("invalid_grant", "the code was issued to another client or redirect URI")
    if not pkce_matches(grant.code_challenge, form["code_verifier"]):
        raise GrantError("invalid_grant", "code_verifier does not match the code_challenge (PKCE S256)")
    if not ledger.spend(grant.jti):
        raise GrantError("invalid_grant", "the authorization code was already used")
    return token_response(auth, grant, root)


def _narrowed(asked: str, had: str) -> str:
    """A refresh's `scope`: each resource scope covered by a granted one (`patient/*.rs` covers
    `patient/Observation.rs` and `patient/Observation.rs?category=laboratory`), the others granted as
    they are; GrantError when it asks for more."""
    try:
        granted = parse_scopes(had)
        for text in asked.split():
            scope = parse_scope(text)
            kept = text in had.split() if scope is None else any(g.covers(scope) for g in granted)
            if not kept:
                raise GrantError("invalid_scope", "a refresh may only narrow the granted scopes: "
                                                  f"{text[:80]!r} is not within them")
    except ScopeError as exc:
        raise GrantError("invalid_scope", str(exc)) from exc
    return " ".join(asked.split())


def refresh(auth: Any, form: dict[str, str], root: str) -> dict:
    """grant_type=refresh_token: a new access token (and refresh token) with the same context, and the
    same or fewer scopes."""
    if not form.get("refresh_token"):
        raise GrantError("invalid_request", "refresh_token is required")
    try:
        grant = open_refresh(auth.key, form["refresh_token"])
    except InvalidToken as exc:
        raise GrantError("invalid_grant", f"invalid refresh token: {exc}") from exc
    if auth.revocations.is_revoked(grant.jti):
        raise GrantError("invalid_grant", "the refresh token was revoked")
    if form.get("client_id") != grant.client_id:
        raise GrantError("invalid_grant", "the refresh token was issued to another client")
    if form.get("scope"):
        asked = _narrowed(form["scope"], grant.scope)
        grant = Authorization(grant.context, asked, grant.client_id, grant.redirect_uri,
                              user=grant.user, nonce=grant.nonce)
    return token_response(auth, grant, root)
