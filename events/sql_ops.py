"""Statements shared by the SQL log's producer (sql_log.py) and its consumers (sql_consumer.py)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError


def now_ms() -> int:
    return int(time.time() * 1000)


def upsert(conn: Connection, model: type, values: dict, keys: Sequence[str], update_cols: Sequence[str] = ()):
    """INSERT .. ON CONFLICT (keys) DO UPDATE/NOTHING on SQLite and PostgreSQL."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(model).values(**values)
    if update_cols:
        stmt = stmt.on_conflict_do_update(
            index_elements=list(keys), set_={c: stmt.excluded[c] for c in update_cols}
        )
    else:
        stmt = stmt.on_conflict_do_nothing(index_elements=list(keys))
    conn.execute(stmt)


def retryable(exc: DBAPIError) -> bool:
    """PostgreSQL deadlock (40P01) or serialization failure (40001), or SQLite's "database is locked"."""
    return getattr(exc.orig, "sqlstate", None) in ("40P01", "40001") or "locked" in str(exc.orig)
