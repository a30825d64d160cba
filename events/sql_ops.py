"""Statements shared by the SQL log's producer (sql_log.py) and its consumers (sql_consumer.py), the outbox
and the projections (`bulk_insert`: many rows through the driver, a statement compiled once)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

from sqlalchemy import Table, insert
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Compiled, Connection
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


def bulk_insert(
    conn: Connection,
    table: Table,
    rows: Sequence[dict[str, Any]] | Sequence[tuple[Any, ...]],
    *,
    columns: Sequence[str] | None = None,
) -> None:
    """INSERT many rows through the driver's executemany with a statement compiled once, in primary-key order.

    SQLAlchemy's per-row parameter processing costs more than the insert itself at tens of thousands of rows
    per second; rows here hold plain values (str, int, float, None) of the table's own columns: dicts, or
    tuples in the order of `columns`. Sorted by primary key, a batch walks each index page once instead of
    jumping between pages at random (event ids are uuids), which keeps a large index out of the disk cache's
    way; the rows written are the same."""
    if not rows:
        return
    names = list(columns if columns is not None else rows[0])
    compiled = _compiled(conn, ("insert", table, tuple(names)), lambda: insert(table), column_keys=names)
    if not compiled.positional:  # named parameters (psycopg): dicts keyed by column
        params = list(rows) if columns is None else [dict(zip(names, row, strict=True)) for row in rows]
        order = names
    else:
        order = list(compiled.positiontup)
        if columns is not None and order == names:
            params = list(rows)
        else:
            pick = itemgetter(*(order if columns is None else [names.index(name) for name in order]))
            params = list(map(pick, rows)) if len(order) > 1 else [(value,) for value in map(pick, rows)]
    key = [c.name for c in table.primary_key.columns]
    if key and set(key) <= set(order):
        params.sort(key=itemgetter(*key) if not compiled.positional else itemgetter(*map(order.index, key)))
    conn.exec_driver_sql(compiled.string, params)


_COMPILED: dict[tuple[Any, ...], Compiled] = {}


def _compiled(conn: Connection, key: tuple[Any, ...], statement: Callable[[], Any], **kw: Any) -> Compiled:
    """A bulk statement compiled once per (statement shape, dialect): compiling costs ~1 ms, paid per batch
    before — most of a small batch's fixed cost when a consumer keeps up with its topic."""
    key = (*key, type(conn.dialect), conn.dialect.paramstyle)
    compiled = _COMPILED.get(key)
    if compiled is None:
        if len(_COMPILED) > 1024:  # projections with suffixes make new tables: stay bounded
            _COMPILED.clear()
        compiled = _COMPILED[key] = statement().compile(dialect=conn.dialect, **kw)
    return compiled
