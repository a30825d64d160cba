"""Revoked tokens (RFC 7009): access and refresh tokens are signed and stateless, so revoking one records its
`jti` in `auth_revoked` until it would have expired; verification then refuses it.

Every worker must see a revocation, so the table is the truth; each process keeps the set of revoked ids it
last read and reads it again at most once a second (`REFRESH_S`), so a revoked token stops working on every
worker within a second and immediately on the one that revoked it, at the cost of one small query per
second per worker rather than one per request.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

from sqlalchemy import Engine, delete, select
from sqlalchemy.dialects import postgresql, sqlite

from services.fhir_api.auth.models import REVOKED

REFRESH_S = 1.0


class Revocations:
    def __init__(self, engine: Engine | None) -> None:
        self.engine = engine
        self._ids: frozenset[str] = frozenset()
        self._read_at = float("-inf")
        self._lock = threading.Lock()

    def revoke(self, jti: str, expires: int) -> None:
        """Record `jti` as revoked until `expires` (epoch seconds); forget the expired ones."""
        if self.engine is None or not jti:
            return
        dialect = postgresql if self.engine.dialect.name == "postgresql" else sqlite
        row = {"jti": jti[:64], "expires_at": datetime.fromtimestamp(expires, UTC)}
        with self.engine.begin() as conn:
            conn.execute(dialect.insert(REVOKED).values(**row).on_conflict_do_nothing(index_elements=["jti"]))
            conn.execute(delete(REVOKED).where(REVOKED.c.expires_at < datetime.now(UTC)))
        with self._lock:
            self._ids = self._ids | {jti[:64]}

    @property
    def stale(self) -> bool:
        """Whether the next check should read the table first (`reload`, off the event loop)."""
        return self.engine is not None and time.monotonic() - self._read_at > REFRESH_S

    def reload(self) -> None:
        with self._lock:
            if not self.stale:
                return
            assert self.engine is not None
            with self.engine.connect() as conn:
                now = datetime.now(UTC)
                ids = conn.execute(select(REVOKED.c.jti).where(REVOKED.c.expires_at >= now)).scalars()
                self._ids = frozenset(ids)
            self._read_at = time.monotonic()

    def is_revoked(self, jti: str) -> bool:
        """Whether `jti` was revoked, as of the last read (blocking when stale: the token endpoint's
        thread pool calls it; the middleware reloads off the event loop first)."""
        if self.stale:
            self.reload()
        return bool(jti) and jti[:64] in self._ids
