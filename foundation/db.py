"""SQLAlchemy plumbing shared by every component: the declarative base, the engine factory, the bulk insert.

The lowest floor: it imports nothing of the project. Which modules declare tables on `Base` is the
composition root's business (rounds/migrate.py `MODEL_MODULES`, `load_all_models()`): each component declares
its tables on this `Base` when its models module is imported, and only alembic's environment and the schema
tests need all of them at once."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

from sqlalchemy import Connection, Dialect, Engine, MetaData, Table, create_engine, event, insert
from sqlalchemy.orm import DeclarativeBase

# Stable constraint names so alembic autogenerate and both dialects agree.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def _sqlite_pragmas(dbapi_conn, _record) -> None:  # pragma: no cover - trivial
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


SQLITE_BEGIN = "sqlite_begin"  # conn.info key: the BEGIN a connection's next transaction starts with


def _sqlite_begin(conn) -> None:
    """Who begins a SQLite transaction, per connection of the one shared engine. A connection that sets
    `conn.info[SQLITE_BEGIN]` ("BEGIN", or "BEGIN IMMEDIATE" for a writer that reads first, so concurrent
    writers queue on the busy timeout, not failing on a stale snapshot) gets it from SQLAlchemy: the FHIR
    store, whose nested transactions need SAVEPOINTs, which pysqlite's own handling breaks. Any other keeps
    pysqlite's handling (the transaction begins at the first write, reads before it see the latest commit),
    which the event log, the outbox relay and a re-score's members in other processes rely on."""
    begin = conn.info.pop(SQLITE_BEGIN, None)
    conn.connection.driver_connection.isolation_level = None if begin else ""
    if begin:
        conn.exec_driver_sql(begin)


def make_engine(url: str, **kwargs) -> Engine:
    """Create an engine for `url`, tuned per dialect. Only a composition root calls it (the `rounds` commands,
    a test's fixture): one engine per process and database, handed to every component that needs it."""
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30}, **kwargs)
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    if url.startswith("postgresql+psycopg"):
        # no server-side prepared statements: their generic plans ignore how selective a patient id is
        # (a FHIR search of 100 ms turned into 30 s after five executions)
        kwargs["connect_args"] = {"prepare_threshold": None, **kwargs.get("connect_args", {})}
    if "poolclass" not in kwargs:
        kwargs.setdefault("pool_size", 10)
        kwargs.setdefault("max_overflow", 20)
    kwargs.setdefault("pool_pre_ping", True)
    return create_engine(url, **kwargs)


def checkpoint(database: Path) -> None:
    """Fold a SQLite database's write-ahead log into its file, so that copying the file alone copies all of
    it (a template a new database is copied from, a store shared between test workers)."""
    conn = sqlite3.connect(database)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


_INSERTS: dict[tuple[Table, str, str], tuple[str, tuple[Callable | None, ...]] | None] = {}


def _positional_insert(table: Table, dialect: Dialect) -> tuple[str, tuple[Callable | None, ...]] | None:
    """The driver's INSERT of every column of `table` in column order and each column's bind processor
    (None: the value goes to the driver as it is), or None when the driver takes named parameters; made
    once per table and driver."""
    key = (table, dialect.name, dialect.driver)
    if key not in _INSERTS:
        _INSERTS[key] = _compile_insert(table, dialect)
    return _INSERTS[key]


def _compile_insert(table: Table, dialect: Dialect) -> tuple[str, tuple[Callable | None, ...]] | None:
    names = [c.name for c in table.columns]
    compiled = insert(table).compile(dialect=dialect, column_keys=names)
    if not compiled.positional or list(compiled.positiontup or ()) != names:
        return None
    return compiled.string, tuple(c.type._cached_bind_processor(dialect) for c in table.columns)


def insert_rows(conn: Connection, table: Table, rows: Sequence[tuple]) -> None:
    """Insert `rows` (tuples in `table`'s column order) with one executemany. On a positional driver
    (SQLite) the tuples go to the driver as they are, through the same bind processors SQLAlchemy would
    apply, so the stored values are the same: building a dict per row and SQLAlchemy turning each back into
    a tuple was most of a bulk load's CPU outside SQLite itself. Other drivers get a Core insert."""
    if not rows:
        return
    plan = _positional_insert(table, conn.dialect)
    if plan is None:
        names = [c.name for c in table.columns]
        conn.execute(insert(table), [dict(zip(names, row, strict=True)) for row in rows])
        return
    sql, processors = plan
    if any(processors):
        convert = [(i, f) for i, f in enumerate(processors) if f is not None]
        converted = []
        for row in rows:
            values = list(row)
            for i, f in convert:
                if values[i] is not None:
                    values[i] = f(values[i])
            converted.append(tuple(values))
        rows = converted
    conn.exec_driver_sql(sql, rows if isinstance(rows, list) else list(rows))
