"""SMART App Launch context carried in signed, short-lived JWTs: the EHR `launch` token, the authorization
code and the refresh token.

Each kind has its own issuer (`rounds/launch`, `rounds/code`, `rounds/refresh`), so none of them verifies as
an access token (whose issuer is `rounds`, tokens.py) and none passes for another kind. They carry the
launch context (session, patient, encounter) and, for codes, what the token request must prove (client id,
redirect URI, PKCE challenge). No table: what the server must remember is in the signed token itself, except
that a code is single-use (`CodeLedger`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Literal

from joserfc import jwt
from joserfc.jwk import OctKey

from services.fhir_api.auth.tokens import InvalidToken, open_signed, sign

Kind = Literal["launch", "code", "refresh"]
LIFETIME = {"launch": 3600, "code": 120}  # seconds; a refresh token lives as long as the settings say


@dataclass(frozen=True)
class LaunchContext:
    """What an app is launched into: a session's sandbox (None: the shared record), a patient, an
    encounter, and, for an EHR launch, the app it was issued for."""

    session: str | None = None
    patient: str | None = None  # Patient id (no "Patient/")
    encounter: str | None = None  # Encounter id
    app: str | None = None  # the app's launch URL (EHR launch): its origin bounds the redirect URI


@dataclass(frozen=True)
class Authorization:
    """What an approved authorization request granted: carried by the code and then the refresh token."""

    context: LaunchContext
    scope: str  # granted scopes, space-separated (resource scopes + launch/openid/offline_access ...)
    client_id: str
    redirect_uri: str = ""
    code_challenge: str = ""  # PKCE S256 (codes only)
    jti: str = field(default_factory=lambda: uuid.uuid4().hex)
    user: str = ""  # who approved (the id_token's subject)
    nonce: str = ""  # OpenID Connect: echoed in the id_token


def _sign(key: OctKey, kind: Kind, claims: dict, expires_in: int) -> str:
    now = int(time.time())
    body = {k: v for k, v in claims.items() if v not in (None, "")}
    body.update(iss=f"rounds/{kind}", iat=now, exp=now + expires_in)
    return sign(key, body)


def _open(key: OctKey, kind: Kind, token: str) -> dict:
    registry = jwt.JWTClaimsRegistry(iss={"essential": True, "value": f"rounds/{kind}"},
                                     exp={"essential": True})
    claims = open_signed(key, token, registry, f"{kind} token")
    if not all(isinstance(v, str) for k, v in claims.items() if k not in ("iat", "exp")):
        raise InvalidToken(f"malformed {kind} token")
    return claims


def issue_launch(key: OctKey, context: LaunchContext, expires_in: int = LIFETIME["launch"]) -> str:
    """The opaque `launch` parameter of an EHR launch (`rounds launch`)."""
    return _sign(key, "launch", asdict(context), expires_in)


def open_launch(key: OctKey, token: str) -> LaunchContext:
    claims = _open(key, "launch", token)
    return LaunchContext(claims.get("session"), claims.get("patient"), claims.get("encounter"),
                         claims.get("app"))


def _claims(grant: Authorization) -> dict:
    return {**asdict(grant.context), "scope": grant.scope, "client_id": grant.client_id,
            "redirect_uri": grant.redirect_uri, "code_challenge": grant.code_challenge, "jti": grant.jti,
            "user": grant.user, "nonce": grant.nonce}


def _grant(claims: dict) -> Authorization:
    context = LaunchContext(claims.get("session"), claims.get("patient"), claims.get("encounter"),
                            claims.get("app"))
    return Authorization(context, claims.get("scope", ""), claims.get("client_id", ""),
                         claims.get("redirect_uri", ""), claims.get("code_challenge", ""),
                         claims.get("jti", ""), claims.get("user", ""), claims.get("nonce", ""))


def issue_code(key: OctKey, grant: Authorization) -> str:
    return _sign(key, "code", _claims(grant), LIFETIME["code"])


def open_code(key: OctKey, token: str) -> Authorization:
    return _grant(_open(key, "code", token))


def issue_refresh(key: OctKey, grant: Authorization, expires_in: int) -> str:
    return _sign(key, "refresh", {**_claims(grant), "code_challenge": None, "jti": uuid.uuid4().hex},
                 expires_in)


def open_refresh(key: OctKey, token: str) -> Authorization:
    return _grant(refresh_claims(key, token))


def refresh_claims(key: OctKey, token: str) -> dict:
    """A refresh token's claims (its `jti` and `exp` among them: what revocation records)."""
    return _open(key, "refresh", token)


def s256(verifier: str) -> str:
    """The PKCE S256 challenge of `verifier` (RFC 7636 §4.2)."""
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")


VERIFIER = re.compile(r"[A-Za-z0-9\-._~]{43,128}")  # RFC 7636 §4.1: unreserved characters, 43 to 128


def pkce_matches(challenge: str, verifier: str) -> bool:
    return bool(challenge) and VERIFIER.fullmatch(verifier) is not None \
        and hmac.compare_digest(s256(verifier), challenge)


class CodeLedger:
    """Codes already exchanged (RFC 6749 §4.1.2: a code is used once), kept until they expire. Per
    process: behind several workers a code replayed to another worker within its two minutes is not caught,
    which PKCE bounds (the verifier is needed as well)."""

    def __init__(self) -> None:
        self._used: dict[str, float] = {}
        self._lock = threading.Lock()

    def spend(self, jti: str) -> bool:
        """True the first time `jti` is spent."""
        now = time.time()
        with self._lock:
            for old in [k for k, t in self._used.items() if t < now]:
                del self._used[old]
            if jti in self._used:
                return False
            self._used[jti] = now + LIFETIME["code"]
            return True
