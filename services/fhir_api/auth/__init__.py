"""Access control for the FHIR API: SMART-style bearer tokens and scopes. See README.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from joserfc.jwk import OctKey, RSAKey
from sqlalchemy import Engine

from rounds.settings import Settings
from services.fhir_api.auth.launch import CodeLedger
from services.fhir_api.auth.oidc import id_token_key
from services.fhir_api.auth.revocation import Revocations
from services.fhir_api.auth.scopes import Scope, parse_scopes
from services.fhir_api.auth.throttle import Throttle
from services.fhir_api.auth.tokens import issue, signing_key

SESSION_SCOPES = "user/*.cruds"
PATIENT_SESSION_SCOPES = "patient/*.cruds"


@dataclass
class Auth:
    """What the middleware and the token-issuing routes share (app.state.auth; None when auth is off)."""

    settings: Settings
    key: OctKey
    store: Any
    max_body_bytes: int
    codes: CodeLedger = field(default_factory=CodeLedger)  # authorization codes already exchanged
    id_key: RSAKey | None = None  # signs id_tokens (oidc.py); None where no token endpoint runs
    revocations: Revocations = field(default_factory=lambda: Revocations(None))  # RFC 7009
    throttle: Throttle = field(init=False)  # failed logins and client authentications (throttle.py)

    def __post_init__(self) -> None:
        self.throttle = Throttle(self.settings.auth_failed_attempts, self.settings.auth_failed_window_s)

    def session_token(self, session_id: str, patient: str | None, encounter: str | None = None) -> str:
        """The token handed out with a new session: read + write on its sandbox only, and with a patient
        only in that patient's compartment; the encounter rides along as launch context (a claim, not a
        filter), as in a SMART EHR launch."""
        scopes = parse_scopes(PATIENT_SESSION_SCOPES if patient else SESSION_SCOPES)
        return issue(self.key, scopes, expires_in=self.settings.auth_session_token_seconds,
                     subject=f"session:{session_id}", session=session_id, patient=patient,
                     encounter=encounter)

    def token(self, scopes: tuple[Scope, ...], subject: str, expires_in: int | None = None, *,
              session: str | None = None, patient: str | None = None) -> str:
        """An access token of the token endpoint (client credentials, or a launched app's: bound to its
        session and patient)."""
        return issue(self.key, scopes, expires_in=expires_in or self.settings.auth_token_seconds,
                     subject=subject, session=session, patient=patient)


def install_auth(app: Any, settings: Settings, store: Any, max_body_bytes: int) -> Auth | None:
    """Hook access control into `app` when settings.auth is on (the only place it is wired)."""
    from services.fhir_api.auth import authorize, introspection, login, smart
    from services.fhir_api.auth.middleware import AuthMiddleware

    app.include_router(smart.router)  # discovery answers either way (capabilities: none when off)
    app.include_router(authorize.router)
    app.include_router(login.router)
    app.include_router(introspection.router)
    if not settings.auth:
        app.state.auth = None
        return None
    engine = store.engine  # the key lives beside the record
    auth = Auth(settings, signing_key(engine, settings.auth_key), store, max_body_bytes,
                id_key=id_token_key(engine), revocations=Revocations(engine))
    app.state.auth = auth
    app.add_middleware(AuthMiddleware, auth=auth)
    return auth


def deployment_key(settings: Any, engine: Engine) -> OctKey:
    """The deployment's signing key for a process without a FHIR app of its own (simulator, scorer):
    ROUNDS_AUTH_KEY, or the key kept in the database of the process's `engine` (the one `rounds serve`
    uses), so what they sign and verify agrees with the server."""
    return signing_key(engine, getattr(settings, "auth_key", None))


def service_headers(settings: Any, engine: Engine, scope: str = "system/*.cruds") -> dict[str, str]:
    """Authorization for Rounds' own services (simulator, scorer) calling the API on the same database:
    they sign their token with the deployment's key. Empty when auth is off."""
    if not getattr(settings, "auth", False):
        return {}
    token = issue(deployment_key(settings, engine), parse_scopes(scope),
                  expires_in=settings.auth_session_token_seconds, subject="rounds-service")
    return {"Authorization": f"Bearer {token}"}


def endpoint_auth(settings: Any, engine: Engine) -> Auth | None:
    """Access control for session endpoints served apart from the FHIR app (the simulator's patient and MCP
    endpoints next to a separate `rounds serve`): the deployment's key and the middleware's rules, so a token
    is judged there exactly as on the server. No store: those endpoints have no FHIR base, so no compartment
    check ever reads one. None when auth is off."""
    if not getattr(settings, "auth", False):
        return None
    return Auth(settings, deployment_key(settings, engine), store=None, max_body_bytes=0)
