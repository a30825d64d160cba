"""The session rows of the SQL store: a sandbox opened (with its clock), looked up, dropped, what it wrote.

Ending a session keeps its rows (the scorer reads its writes) but closes its FHIR base.

A mixin of SqlResourceStore (it brings `_conn` and `_reading`), kept apart so the store's module holds the
resource reads and writes. Dropping a session removes its rows, versions and index rows only: the shared
record is never touched (copy-on-write: a session's rows shadow shared ones, they never replace them).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update

from services.fhir_api.store import models as m
from services.fhir_api.store.connections import raise_if_unanswered, rows_of
from services.fhir_api.store.interface import Context, StoredResource
from services.fhir_api.store.rows import SESSION, session_context
from services.fhir_api.store.session_writes import session_writes


def _utc(now: datetime) -> datetime:
    """A session clock as stored: in UTC (SQLite drops the offset, so a local-time clock would shift by
    hours)."""
    return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)


class SessionRows:
    _conn: Callable[..., AbstractContextManager[Connection]]
    _reading: Callable[[Callable[[Connection], Any]], Any]

    def create_session(self, now: datetime | None = None) -> str:
        sid = uuid.uuid4().hex
        now = _utc(now) if now is not None else None
        with self._conn(write=True) as conn:
            conn.execute(insert(m.session).values(id=sid, now=now, created=datetime.now(UTC)))
        return sid

    def get_session(self, session_id: str) -> Context | None:
        try:
            row = self._reading(lambda conn: next(iter(rows_of(conn, SESSION, {"sid": session_id})), None))
        except Exception as exc:  # noqa: BLE001 - contract: unknown/invalid -> None, unreachable -> 503
            raise_if_unanswered(exc)
            return None
        return session_context(row)

    def set_session_clock(self, session_id: str, now: datetime) -> bool:
        """Move a session's as-of clock (`rounds feed`); False when there is no such session."""
        with self._conn(write=True) as conn:
            done = conn.execute(update(m.session).where(m.session.c.id == session_id).values(now=_utc(now)))
        return bool(done.rowcount)

    def end_session(self, session_id: str) -> bool:
        """Mark the session ended (idempotent; the first end's time is kept)."""
        with self._conn(write=True) as conn:
            found = conn.execute(select(m.session.c.id).where(m.session.c.id == session_id)).first()
            conn.execute(update(m.session).where(m.session.c.id == session_id, m.session.c.ended.is_(None))
                         .values(ended=datetime.now(UTC)))
        return found is not None

    def drop_session(self, session_id: str) -> None:
        if not session_id:
            return
        with self._conn(write=True) as conn:
            rids = select(m.resource.c.rid).where(m.resource.c.session == session_id)
            for table in m.INDEX_TABLES.values():
                conn.execute(delete(table).where(table.c.rid.in_(rids)))
            conn.execute(delete(m.resource).where(m.resource.c.session == session_id))
            conn.execute(delete(m.version).where(m.version.c.session == session_id))
            conn.execute(delete(m.session).where(m.session.c.id == session_id))

    def session_writes(self, session_id: str) -> list[StoredResource]:
        """The current version of each resource the session wrote (store/session_writes.py)."""
        return self._reading(lambda conn: session_writes(conn, session_id))

