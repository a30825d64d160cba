"""Engine plumbing for SqlResourceStore: per-engine set-up done once (SQLite transaction mode, PostgreSQL
planner options) and the autocommit reader engine reads run on."""

from __future__ import annotations

import weakref

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import DBAPIError

_SQLITE_READY: weakref.WeakSet = weakref.WeakSet()
_PG_TUNED: weakref.WeakSet = weakref.WeakSet()
# The store's working set is cached and it serves many small concurrent requests: random reads cost about
# what sequential ones do (index probes by rid over hashing whole index ranges), and parallel workers only
# add latency on a shared machine. Session settings, passed at connection start (no extra round trip).
PLANNER_OPTIONS = "-c random_page_cost=1.1 -c max_parallel_workers_per_gather=0"


def _planner_settings(_dialect, _record, _cargs, cparams: dict) -> None:
    cparams["options"] = f"{cparams.get('options', '')} {PLANNER_OPTIONS}".strip()


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


def prepare_engine(engine: Engine) -> Engine | None:
    """Set the engine up once for the store; returns the reader engine on PostgreSQL (None on SQLite)."""
    if engine.dialect.name == "sqlite":
        if engine not in _SQLITE_READY:
            from services.fhir_api.store import sqlite_transactions

            sqlite_transactions(engine)
            _SQLITE_READY.add(engine)
        return None
    if engine.dialect.name != "postgresql":
        return None
    if engine not in _PG_TUNED:
        event.listen(engine, "do_connect", _planner_settings)
        _PG_TUNED.add(engine)
    return _reader_engine(engine)
