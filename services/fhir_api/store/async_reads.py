"""Reads by key on the event loop (PostgreSQL): no worker thread between the request and its one statement.

A read handed to a worker thread spent more CPU on the hand-off (thread wake-ups and GIL transfers, ~250 µs)
than on running its statement (~200 µs). These run the same prebuilt statements (store/rows.py) on an
asyncio psycopg pool, one per event loop, opened at first use. Like the threaded reader, connections are not
pinged at checkout: a read whose connection the server dropped runs once more on a fresh one.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

import psycopg
from psycopg.rows import namedtuple_row
from psycopg_pool import AsyncConnectionPool
from sqlalchemy import Engine, Select

from services.fhir_api.search.engine import driver_sql
from services.fhir_api.store.connections import PLANNER_OPTIONS, connection_lost


class AsyncReader:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
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
                kwargs={"autocommit": True, "prepare_threshold": None, "options": PLANNER_OPTIONS},
            )
            self._pools[loop] = pool
            await pool.open()
        return pool

    async def rows(self, stmt: Select, values: dict[str, Any]) -> list:
        """All rows of a prebuilt statement (a read by key: the server may keep its plan)."""
        sql = driver_sql(stmt, self.engine.dialect, values)
        if sql is None:
            raise ValueError("statement needs SQLAlchemy at execution")
        text, constants = sql
        params = {**constants, **values}
        pool = await self._pool()
        for attempt in (1, 2):
            try:
                async with pool.connection() as conn, conn.cursor(row_factory=namedtuple_row) as cur:
                    await cur.execute(text, params, prepare=True)
                    return await cur.fetchall()
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
