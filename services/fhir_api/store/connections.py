"""Engine plumbing for SqlResourceStore: per-engine set-up done once (SQLite transaction mode, PostgreSQL
planner options, the query timeout), the autocommit reader engine reads run on, and prebuilt statements run
straight on the driver (`rows_of`, `driver_sql`)."""

from __future__ import annotations

import sqlite3
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.rows import namedtuple_row
from sqlalchemy import Connection, Engine, Select, create_engine, event
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from services.fhir_api.store.interface import QueryTimeout, StoreUnavailable

_SQLITE_BOUNDED: weakref.WeakSet = weakref.WeakSet()  # ... and whose statements a progress handler bounds
_PG_TUNED: weakref.WeakSet = weakref.WeakSet()
# The store's working set is cached and it serves many small concurrent requests: random reads cost about
# what sequential ones do (index probes by rid over hashing whole index ranges), and parallel workers only
# add latency on a shared machine. Session settings, passed at connection start (no extra round trip).
PLANNER_OPTIONS = "-c random_page_cost=1.1 -c max_parallel_workers_per_gather=0"


_OPTIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # PostgreSQL engine -> its session options
# SQLite: how many virtual-machine instructions run between two looks at the clock (about every 50 µs).
PROGRESS_STEPS = 10_000
_INTERRUPTED = "interrupted"  # sqlite3's message when a progress handler stopped a statement


def session_options(engine: Engine) -> str:
    """The PostgreSQL session settings the engine's connections start with (the async reader uses them)."""
    return _OPTIONS.get(engine, PLANNER_OPTIONS)


def _bound_sqlite(engine: Engine, timeout_ms: int) -> None:
    """A statement on SQLite stops when it runs past `timeout_ms`: each statement sets its connection's
    deadline, and a progress handler, called every PROGRESS_STEPS instructions (also while rows are fetched),
    interrupts it past the deadline. sqlite3 releases the GIL while a statement runs, but a runaway one held
    its request's slot and the database for minutes."""
    budget = timeout_ms / 1000

    @event.listens_for(engine, "connect")
    def _handler(dbapi_conn, record) -> None:
        deadline = record.info["deadline"] = [float("inf")]
        dbapi_conn.set_progress_handler(lambda: time.monotonic() > deadline[0], PROGRESS_STEPS)

    @event.listens_for(engine, "before_cursor_execute")
    def _start(conn, _cursor, _statement, _parameters, _context, _many) -> None:
        deadline = conn.connection.info.get("deadline")
        if deadline is not None:
            deadline[0] = time.monotonic() + budget

    @event.listens_for(engine, "checkin")
    def _idle(_dbapi_conn, record) -> None:
        deadline = record.info.get("deadline")
        if deadline is not None:
            deadline[0] = float("inf")


def timed_out(exc: BaseException) -> bool:
    """Whether a statement was stopped by the query timeout (PostgreSQL statement_timeout: SQLSTATE 57014,
    query_canceled; SQLite: the progress handler's interrupt)."""
    orig = exc.orig if isinstance(exc, DBAPIError) else exc
    if isinstance(orig, psycopg.errors.QueryCanceled):
        return True
    return isinstance(orig, sqlite3.OperationalError) and str(orig) == _INTERRUPTED


@contextmanager
def bounded(timeout_ms: int | None) -> Iterator[None]:
    """Turn a statement stopped by the query timeout into QueryTimeout (503 with an OperationOutcome)."""
    try:
        yield
    except (DBAPIError, psycopg.Error, sqlite3.Error) as exc:
        if timed_out(exc):
            raise QueryTimeout(f"the query ran longer than the server allows ({timeout_ms} ms)") from exc
        raise


_UNAVAILABLE = (OperationalError, InterfaceError, PoolTimeout, psycopg.OperationalError,
                psycopg.InterfaceError, sqlite3.OperationalError, OSError)


def unavailable(exc: BaseException) -> StoreUnavailable | None:
    """A StoreUnavailable (503) for a failure that says the database could not answer now — a connection
    refused or lost, a pool exhausted (SQLAlchemy's or psycopg_pool's PoolTimeout), "too many clients",
    SQLite busy — rather than that the request was bad; None for any other failure."""
    if isinstance(exc, _UNAVAILABLE):
        return StoreUnavailable(f"the database did not answer: {type(exc).__name__}: {str(exc)[:200]}")
    return None


def raise_if_unanswered(exc: Exception) -> None:
    """For lookups whose contract is "unknown or invalid -> None" (a session by id): re-raise what says the
    database did not answer (QueryTimeout, StoreUnavailable: 503) so it is never taken for "unknown"."""
    if isinstance(exc, QueryTimeout):
        raise exc
    down = unavailable(exc)
    if down is not None:
        raise down from exc


_READERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _reader_engine(engine: Engine) -> Engine:
    """The engine reads run on (PostgreSQL): autocommit -- under READ COMMITTED each statement has its own
    snapshot anyway, so BEGIN/COMMIT only cost two round trips per request (paging consistency comes from
    `snapshot`) -- on a pool of its own, like the store's but without a ping at every checkout (reads retry
    instead: SqlResourceStore._reading). Writes keep the store's pinged pool."""
    reader = _READERS.get(engine)
    if reader is None:
        pool = engine.pool.recreate()  # same connection factory (and do_connect settings), sizes and events
        pool._pre_ping = False  # no public switch on a pool
        reader = create_engine(engine.url, pool=pool, isolation_level="AUTOCOMMIT")
        event.listen(engine, "engine_disposed", lambda _engine: reader.dispose())
        _READERS[engine] = reader
    return reader


def connection_lost(exc: Exception) -> bool:
    """Whether a read failed because its connection was gone (not because of what it asked)."""
    if isinstance(exc, DBAPIError):
        return exc.connection_invalidated
    state = getattr(exc, "sqlstate", None)
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


def prepare_engine(engine: Engine, timeout_ms: int | None = None) -> Engine | None:
    """Set the engine up once for the store; returns the reader engine on PostgreSQL (None on SQLite).
    `timeout_ms` (> 0) bounds every statement: PostgreSQL `statement_timeout`, a SQLite progress handler."""
    if engine.dialect.name == "sqlite":  # its transactions SQLAlchemy's already (foundation/db.py)
        if timeout_ms and engine not in _SQLITE_BOUNDED:
            _bound_sqlite(engine, timeout_ms)
            _SQLITE_BOUNDED.add(engine)
        return None
    if engine.dialect.name != "postgresql":
        return None
    if engine not in _PG_TUNED:
        options = PLANNER_OPTIONS + (f" -c statement_timeout={int(timeout_ms)}" if timeout_ms else "")
        _OPTIONS[engine] = options

        def _settings(_dialect, _record, _cargs, cparams: dict) -> None:
            cparams["options"] = f"{cparams.get('options', '')} {options}".strip()

        event.listen(engine, "do_connect", _settings)
        _PG_TUNED.add(engine)
    return _reader_engine(engine)


# SQL of prebuilt statements for the driver: SQL text and the statement's own literal values, or None when the
# statement needs SQLAlchemy at execution (expanding IN lists, processed or renamed parameters).
_DRIVER_SQL: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def driver_sql(stmt: Select, dialect, values: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(SQL text, the statement's own literal values) to run `stmt` straight through psycopg, compiled once;
    None when it needs SQLAlchemy at execution (expanding IN lists, processed or renamed parameters)."""
    sql = _DRIVER_SQL.get(stmt, False)
    if sql is False:
        compiled = stmt.compile(dialect=dialect)
        plain = not (
            compiled._bind_processors
            or compiled.literal_execute_params
            or compiled.post_compile_params
            or compiled.escaped_bind_names
            or compiled.positional
        )
        constants = dict(compiled.construct_params(values))
        sql = _DRIVER_SQL[stmt] = (compiled.string, constants) if plain else None
    return sql


def rows_of(conn: Connection, stmt: Select, values: dict[str, Any], *, prepare: bool = False) -> list:
    """All rows of a prebuilt statement run with `values` (every named bind of the statement).

    On PostgreSQL the statement is compiled once and run straight through psycopg: SQLAlchemy's per-execution
    work (execution context, parameter processing, result wrapping) cost twice what the driver's did. Rows
    keep attribute access by column name. `prepare` lets the server keep the plan, outside transactions (only
    for statements whose plan does not depend on the values, such as a read by key)."""
    sql = driver_sql(stmt, conn.dialect, values) if conn.dialect.name == "postgresql" else None
    if sql is None:
        return conn.execute(stmt, values).all()
    text, constants = sql
    driver = conn.connection.driver_connection
    with driver.cursor(row_factory=namedtuple_row) as cur:
        cur.execute(text, {**constants, **values}, prepare=(prepare and driver.autocommit) or None)
        return cur.fetchall()
