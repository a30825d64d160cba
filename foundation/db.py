"""SQLAlchemy plumbing shared by every component: the declarative base and the engine factory.

The lowest floor: it imports nothing of the project. Which modules declare tables on `Base` is the
composition root's business (rounds/migrate.py `MODEL_MODULES`, `load_all_models()`): each component declares
its tables on this `Base` when its models module is imported, and only alembic's environment and the schema
tests need all of them at once."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy import Engine, MetaData, create_engine, event
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
    dbapi_conn.isolation_level = None  # SQLAlchemy owns the transactions (_sqlite_begin), not pysqlite
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def _sqlite_begin(conn) -> None:
    """pysqlite's own transaction handling breaks SAVEPOINTs and so nested transactions: SQLAlchemy begins
    them. A writer that reads first asks for BEGIN IMMEDIATE (`conn.info["immediate"] = True`), so concurrent
    writers queue on the busy timeout instead of failing on a stale snapshot."""
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.info.pop("immediate", False) else "BEGIN")


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
