"""Registered clients: a backend service of the client-credentials grant (a shared secret, kept as its
sha256), or an app of SMART App Launch (its exact redirect URIs, the FHIR base it is registered for, and a
secret when it is confidential; none when public, whose proof is PKCE). Registered with
`rounds token client --id ID --scope S [--redirect-uri URI ...] [--fhir-base URL] [--public]`."""

from __future__ import annotations

import hashlib
import hmac
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


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def register_client(engine: Engine, client_id: str, scope: str, secret: str | None = None, *,
                    redirect_uris: tuple[str, ...] = (), fhir_base: str | None = None,
                    public: bool = False) -> str:
    """Create (or replace) a client; returns its secret (generated unless given; "" for a public one)."""
    parse_scopes(scope)  # refuse what could never be granted
    for uri in redirect_uris:
        parts = urlsplit(uri)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.fragment:
            raise ValueError(f"a redirect URI is an absolute http(s) URL without a fragment: {uri!r}")
    if public and secret:
        raise ValueError("a public client has no secret")
    if public and not redirect_uris:
        raise ValueError("a public client is an app: give its redirect URIs")
    secret = "" if public else (secret or secrets.token_urlsafe(32))
    with engine.begin() as conn:
        conn.execute(delete(CLIENTS).where(CLIENTS.c.client_id == client_id))
        conn.execute(insert(CLIENTS).values(
            client_id=client_id, secret_sha256=PUBLIC if public else _digest(secret), scope=scope,
            created_at=datetime.now(UTC), redirect_uris=" ".join(redirect_uris),
            fhir_base=fhir_base.rstrip("/") if fhir_base else None))
    return secret


def find_client(engine: Engine, client_id: str) -> Client | None:
    with engine.connect() as conn:
        row = conn.execute(select(CLIENTS).where(CLIENTS.c.client_id == client_id)).first()
    if row is None:
        return None
    return Client(row.client_id, row.scope, tuple(row.redirect_uris.split()), row.fhir_base,
                  row.secret_sha256 != PUBLIC)


def authenticate(engine: Engine, client_id: str, secret: str) -> tuple[Scope, ...] | None:
    """The scopes a confidential client may be granted, or None when the id or the secret is wrong."""
    with engine.connect() as conn:
        row = conn.execute(select(CLIENTS.c.secret_sha256, CLIENTS.c.scope)
                           .where(CLIENTS.c.client_id == client_id)).first()
    if row is None or row.secret_sha256 == PUBLIC or not hmac.compare_digest(row.secret_sha256,
                                                                            _digest(secret)):
        return None
    return parse_scopes(row.scope)
