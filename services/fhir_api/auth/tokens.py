"""Bearer tokens: HS256 JWTs (joserfc) signed with one key per deployment.

The key is ROUNDS_AUTH_KEY when set (at least 32 bytes), else a random key generated on first use and kept in
`auth_keys` (row 1): the first process to need it inserts it, every other one (API workers, `rounds token
issue`, the simulator, the scorer) reads the same row, so tokens agree with no set-up.

Claims: `iss` "rounds", `sub` who it was issued to, `iat`, `exp` (required), `jti`, `scope` (SMART scopes,
space-separated), and optionally `session` (the token is valid only under that session's paths) and `patient`
(the patient whose compartment `patient/` scopes are confined to).
"""

from __future__ import annotations

import secrets
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import OctKey
from sqlalchemy import Engine, select
from sqlalchemy.dialects import postgresql, sqlite

from services.fhir_api.auth.models import KEYS
from services.fhir_api.auth.scopes import Scope, ScopeError, format_scopes, parse_scopes

ISSUER = "rounds"
ALGORITHM = "HS256"
MIN_KEY_BYTES = 32
_CLAIMS = jwt.JWTClaimsRegistry(
    iss={"essential": True, "value": ISSUER}, exp={"essential": True}, scope={"essential": True}
)


class InvalidToken(Exception):
    """A token that is malformed, badly signed, expired or carries unusable claims (-> 401)."""


@dataclass(frozen=True)
class Grant:
    """What a verified token allows."""

    subject: str
    scopes: tuple[Scope, ...]
    expires: int
    session: str | None = None
    patient: str | None = None  # Patient id (no "Patient/")
    jti: str = ""  # the token's id: what revocation (revocation.py) records
    issued: int = 0


def signing_key(engine: Engine | None, configured: str | None) -> OctKey:
    """The deployment's key: `configured` (ROUNDS_AUTH_KEY) or the one kept in the database."""
    if configured is not None:
        raw = configured.encode()
        if len(raw) < MIN_KEY_BYTES:
            raise ValueError(f"ROUNDS_AUTH_KEY must be at least {MIN_KEY_BYTES} bytes long")
        return OctKey.import_key(raw)
    if engine is None:
        raise ValueError("auth needs ROUNDS_AUTH_KEY or a database to keep a generated key in")
    dialect = postgresql if engine.dialect.name == "postgresql" else sqlite
    row = {"id": 1, "secret": secrets.token_urlsafe(48), "created_at": datetime.now(UTC)}
    with engine.begin() as conn:  # the first process wins; the others read its key
        conn.execute(dialect.insert(KEYS).values(**row).on_conflict_do_nothing(index_elements=["id"]))
        secret = conn.execute(select(KEYS.c.secret).where(KEYS.c.id == 1)).scalar_one()
    return OctKey.import_key(secret.encode())


def issue(
    key: OctKey,
    scopes: tuple[Scope, ...],
    *,
    expires_in: int,
    subject: str = "rounds",
    session: str | None = None,
    patient: str | None = None,
    encounter: str | None = None,
) -> str:
    now = int(time.time())
    claims: dict = {"iss": ISSUER, "sub": subject, "iat": now, "exp": now + expires_in,
                    "jti": uuid.uuid4().hex, "scope": format_scopes(scopes)}
    if session is not None:
        claims["session"] = session
    if patient is not None:
        claims["patient"] = patient
    if encounter is not None:
        claims["encounter"] = encounter
    return sign(key, claims)


def sign(key: OctKey, claims: dict) -> str:
    """`claims` as a JWT signed with the deployment's key (access tokens here, launch.py's kinds)."""
    return jwt.encode({"alg": ALGORITHM, "typ": "JWT"}, claims, key)


def open_signed(key: OctKey, token: str, registry: jwt.JWTClaimsRegistry, kind: str = "token") -> dict:
    """The claims of a JWT `sign` made that `registry` accepts; InvalidToken (with a reason fit for
    WWW-Authenticate or an OAuth error) otherwise."""
    try:
        decoded = jwt.decode(token, key, algorithms=[ALGORITHM])
        registry.validate(decoded.claims)
    except JoseError as exc:
        raise InvalidToken(exc.description or exc.error) from exc
    except (ValueError, TypeError) as exc:  # not even a JWS
        raise InvalidToken(f"malformed {kind}") from exc
    return decoded.claims


def verify(key: OctKey, token: str) -> Grant:
    """The grant of a valid access token; InvalidToken otherwise."""
    claims = open_signed(key, token, _CLAIMS)
    try:
        scopes = parse_scopes(str(claims["scope"]))
    except ScopeError as exc:
        raise InvalidToken(str(exc)) from exc
    session, patient = claims.get("session"), claims.get("patient")
    if not all(v is None or isinstance(v, str) for v in (session, patient)):
        raise InvalidToken("session and patient claims must be strings")
    return Grant(str(claims.get("sub", "")), scopes, int(claims["exp"]), session, patient,
                 str(claims.get("jti", "")), int(claims.get("iat", 0)))
