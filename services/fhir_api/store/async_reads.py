"""Reads and searches on the event loop (PostgreSQL): no worker thread between a request and its statements.

A read handed to a worker thread spent more CPU on the hand-off (thread wake-ups and GIL transfers, ~250 µs)
than on running its statement (~200 µs), and a busy process's threads queued on the GIL in no fair order.
These run the same prebuilt statements (store/rows.py; a search's cached statements, stepped through by
store/engine.py `search_steps`) on an asyncio psycopg pool, one per event loop, opened at first use. Like
the threaded reader, connections are not pinged at checkout: a statement whose connection the server dropped
runs once more on a fresh one. What needs SQLAlchemy at execution (_include, statements not prebuilt) still
runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Generator
from typing import Any

import psycopg
from anyio import to_thread
from psycopg.rows import namedtuple_row
from psycopg_pool import AsyncConnectionPool
from sqlalchemy import Engine, Select

from services.fhir_api.store.asof import visible_row
from services.fhir_api.store.connections import (
    bounded,
    connection_lost,
    driver_sql,
    raise_if_unanswered,
    session_options,
)
from services.fhir_api.store.engine import Step, includes_asked, search_steps
from services.fhir_api.store.interface import (
    Context,
    SearchRequest,
    SearchResult,
    StoredResource,
)
from services.fhir_api.store.rows import CURRENT, SESSION, readable, session_context

NEEDS_THREAD = object()


class AsyncReader:
    def __init__(self, engine: Engine, timeout_ms: int | None = None) -> None:
        self.engine, self.timeout_ms = engine, timeout_ms
        self._conninfo = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._size = engine.pool.size()
        self._pools: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # event loop -> pool

    async def _pool(self) -> AsyncConnectionPool:
        loop = asyncio.get_running_loop()
        pool = self._pools.get(loop)
        if pool is None:
            pool = AsyncConnectionPool(
                self._conninfo,
                min_size=1,
                max_size=self._size,
                open=False,
                kwargs={
                    "autocommit": True,
                    "prepare_threshold": None,
                    "options": session_options(self.engine),  # planner settings, statement_timeout
                    "row_factory": namedtuple_row,
                },
            )
            self._pools[loop] = pool
            await pool.open()
        return pool

    async def rows(self, stmt: Select, values: dict[str, Any]) -> list:
        """All rows of a prebuilt read by key (the server may keep its plan: one fits every key)."""
        sql = driver_sql(stmt, self.engine.dialect, values)
        if sql is None:
            raise ValueError("statement needs SQLAlchemy at execution")
        return await self._execute(sql, values, prepare=True)

    async def drive(self, steps: Generator[Step, Any, Any]) -> Any:
        """Run a search's steps (store/engine.py `search_steps`) on the loop and return its result, or
        NEEDS_THREAD as soon as a step needs a SQLAlchemy connection (the caller runs the search in a thread).
        Never prepared: a search's plan depends on its values."""
        try:
            step = next(steps)
            while True:
                dialect = self.engine.dialect
                sql = None if step.call is not None else driver_sql(step.stmt, dialect, step.values)
                if sql is None:
                    steps.close()
                    return NEEDS_THREAD
                step = steps.send(await self._execute(sql, step.values or {}, prepare=False))
        except StopIteration as done:
            return done.value

    async def _execute(self, sql: tuple[str, dict], values: dict[str, Any], *, prepare: bool) -> list:
        text, constants = sql
        params = {**constants, **values}
        pool = await self._pool()
        for attempt in (1, 2):
            try:
                conn = await pool.getconn()  # pool.connection()'s context manager: ~20 µs a statement more
                try:
                    with bounded(self.timeout_ms):
                        cursor = await conn.execute(text, params, prepare=prepare or None)
                        return await cursor.fetchall()
                finally:
                    await pool.putconn(conn)
            except psycopg.OperationalError as exc:
                if attempt == 2 or not connection_lost(exc):
                    raise
                await pool.check()  # the server dropped connections (restart, idle timeout): discard them all
        raise AssertionError("unreachable")

    async def close(self) -> None:
        """Close the running loop's pool (app shutdown)."""
        pool = self._pools.pop(asyncio.get_running_loop(), None)
        if pool is not None:
            await pool.close()


class LoopReads:
    """SqlResourceStore's awaitable reads: on the loop through `self._async` (an AsyncReader; only a
    PostgreSQL store outside a transaction has one), else the threaded method in a worker thread."""

    _async: AsyncReader | None
    engine: Engine
    read: Callable[[Context, str, str], StoredResource]
    search: Callable[[Context, SearchRequest], SearchResult]
    present: Callable[[Context, list[StoredResource]], list[StoredResource]]
    present_result: Callable[[Context, SearchResult], SearchResult]

    async def read_async(self, ctx: Context, resource_type: str, id: str) -> StoredResource:
        if self._async is None:
            return await to_thread.run_sync(self.read, ctx, resource_type, id)
        session = ctx.session_key
        values = {"rtype": resource_type, "rid": id, "session": session}
        rows = await self._async.rows(CURRENT[True, bool(session)], values)
        found = readable(visible_row(rows, ctx, True), resource_type, id)
        return (await to_thread.run_sync(self.present, ctx, [found]))[0] if ctx.now is not None else found

    async def search_async(self, ctx: Context, request: SearchRequest) -> SearchResult:
        """With _include, or when a step needs SQLAlchemy (a statement that is not prebuilt), in a thread."""
        if self._async is not None and not includes_asked(request):
            result = await self._async.drive(search_steps(self.engine.dialect, ctx, request))
            if result is not NEEDS_THREAD and ctx.now is None:
                return result
            if result is not NEEDS_THREAD:  # as-of views need a lookup of the referenced resources
                return await to_thread.run_sync(self.present_result, ctx, result)
        return await to_thread.run_sync(self.search, ctx, request)

    async def get_session_async(self, session_id: str) -> Context | None:
        """Every request through a session's base asks it: unknown/invalid -> None; the database not
        answering -> QueryTimeout / StoreUnavailable (503), never None."""
        if self._async is None:
            return await to_thread.run_sync(self.get_session, session_id)
        try:
            rows = await self._async.rows(SESSION, {"sid": session_id})
        except Exception as exc:  # noqa: BLE001 - contract: unknown/invalid -> None, unreachable -> 503
            raise_if_unanswered(exc)
            return None
        return session_context(next(iter(rows), None))

    async def close_async(self) -> None:
        if self._async is not None:
            await self._async.close()
