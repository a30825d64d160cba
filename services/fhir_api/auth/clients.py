"""Backend-service clients of the client-credentials grant: a client id, a shared secret (kept as its sha256)
and the scopes the client may be granted. Registered with `rounds token client --id ID --scope S`."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import UTC, datetime

from sqlalchemy import Engine, delete, insert, select

from services.fhir_api.auth.models import CLIENTS
from services.fhir_api.auth.scopes import Scope, parse_scopes


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def register_client(engine: Engine, client_id: str, scope: str, secret: str | None = None) -> str:
    """Create (or replace) a client; returns its secret (generated unless given)."""
    parse_scopes(scope)  # refuse what could never be granted
    secret = secret or secrets.token_urlsafe(32)
    with engine.begin() as conn:
        conn.execute(delete(CLIENTS).where(CLIENTS.c.client_id == client_id))
        conn.execute(insert(CLIENTS).values(client_id=client_id, secret_sha256=_digest(secret), scope=scope,
                                            created_at=datetime.now(UTC)))
    return secret


def authenticate(engine: Engine, client_id: str, secret: str) -> tuple[Scope, ...] | None:
    """The scopes a client may be granted, or None when the id or the secret is wrong."""
    with engine.connect() as conn:
        row = conn.execute(select(CLIENTS.c.secret_sha256, CLIENTS.c.scope)
                           .where(CLIENTS.c.client_id == client_id)).first()
    if row is None or not hmac.compare_digest(row.secret_sha256, _digest(secret)):
        return None
    return parse_scopes(row.scope)
