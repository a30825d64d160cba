"""Registered clients: a backend service of the client-credentials grant (a shared secret, kept as its
sha256), or an app of SMART App Launch (its exact redirect URIs, the FHIR base it is registered for, and a
secret when it is confidential; none when public, whose proof is PKCE), or a backend service of SMART Backend
Services (its public keys: a JWKS, or the URL it publishes them at; assertion.py). Registered with
`rounds token client --id ID --scope S [--redirect-uri URI ...] [--fhir-base URL] [--public]
[--jwks FILE|URL]`."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

from sqlalchemy import Engine, delete, insert, select

from services.fhir_api.auth.models import CLIENTS
from services.fhir_api.auth.scopes import Scope, parse_scopes

PUBLIC = ""  # the stored digest of a public client: no secret matches it


@dataclass(frozen=True)
class Client:
    client_id: str
    scope: str
    redirect_uris: tuple[str, ...]
    fhir_base: str | None  # the audience it is registered for; None: the server's own /fhir
    confidential: bool
    jwks: str | None = None  # SMART Backend Services: a JWKS (JSON) or the https URL of one


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def register_client(engine: Engine, client_id: str, scope: str, secret: str | None = None, *,
                    redirect_uris: tuple[str, ...] = (), fhir_base: str | None = None,
                    public: bool = False, jwks: str | None = None) -> str:
    """Create (or replace) a client; returns its secret (generated unless given; "" for a public one and for
    one that authenticates with its keys, `jwks`)."""
    parse_scopes(scope)  # refuse what could never be granted
    if jwks is not None:
        check_jwks(jwks)
        public = True  # no secret: its signed assertions are its proof
    for uri in redirect_uris:
        parts = urlsplit(uri)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.fragment:
            raise ValueError(f"a redirect URI is an absolute http(s) URL without a fragment: {uri!r}")
    if public and secret:
        raise ValueError("a public client has no secret")
    if public and not redirect_uris and jwks is None:
        raise ValueError("a public client is an app: give its redirect URIs")
    secret = "" if public else (secret or secrets.token_urlsafe(32))
    with engine.begin() as conn:
        conn.execute(delete(CLIENTS).where(CLIENTS.c.client_id == client_id))
        conn.execute(insert(CLIENTS).values(
            client_id=client_id, secret_sha256=PUBLIC if public else _digest(secret), scope=scope,
            created_at=datetime.now(UTC), redirect_uris=" ".join(redirect_uris),
            fhir_base=fhir_base.rstrip("/") if fhir_base else None, jwks=jwks))
    return secret


def check_jwks(jwks: str) -> None:
    """A JWKS document with public keys only, or an https URL (http only for a loopback host)."""
    text = jwks.strip()
    if not text.startswith("{"):
        parts = urlsplit(text)
        loopback = parts.hostname in ("localhost", "127.0.0.1", "::1")
        if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
            raise ValueError(f"--jwks is a JWKS document or an https URL, not {text[:80]!r}")
        return
    try:
        keys = json.loads(text)["keys"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError("--jwks: not a JSON Web Key Set ({'keys': [...]})") from exc
    if not keys or any(not isinstance(k, dict) or "d" in k or k.get("kty") not in ("RSA", "EC")
                       for k in keys):
        raise ValueError("--jwks: give the public RSA or EC keys only (no private part 'd')")


def find_client(engine: Engine, client_id: str) -> Client | None:
    with engine.connect() as conn:
        row = conn.execute(select(CLIENTS).where(CLIENTS.c.client_id == client_id)).first()
    if row is None:
        return None
    return Client(row.client_id, row.scope, tuple(row.redirect_uris.split()), row.fhir_base,
                  row.secret_sha256 != PUBLIC, row.jwks)


def authenticate(engine: Engine, client_id: str, secret: str) -> tuple[Scope, ...] | None:
    """The scopes a confidential client may be granted, or None when the id or the secret is wrong."""
    with engine.connect() as conn:
        row = conn.execute(select(CLIENTS.c.secret_sha256, CLIENTS.c.scope)
                           .where(CLIENTS.c.client_id == client_id)).first()
    if row is None or row.secret_sha256 == PUBLIC or not hmac.compare_digest(row.secret_sha256,
                                                                            _digest(secret)):
        return None
    return parse_scopes(row.scope)
