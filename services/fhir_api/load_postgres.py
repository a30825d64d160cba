"""PostgreSQL side of the bulk load (services/fhir_api/load.py): binary COPY of prepared rows, and the index
tables' b-trees and the shared record's key dropped for an initial load and built again, with fresh
statistics, at its end.

Building a b-tree once from sorted rows costs less than maintaining it row by row (token table alone:
≈ 24 µs/resource to build, ≈ 30 to maintain); a build is PostgreSQL deforming multi-column varchar index
tuples while it sorts, one core per build, so the builds and ANALYZEs run on two connections at once.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from sqlalchemy import Connection, Index, UniqueConstraint, select
from sqlalchemy.schema import AddConstraint, DropConstraint

from services.fhir_api.store import models as m
from services.fhir_api.store.indexing import TABLES

_PG_TYPES = {  # SQLAlchemy type -> PostgreSQL type name, for binary COPY
    "BigInteger": "int8",
    "Integer": "int4",
    "String": "varchar",
    "DateTime": "timestamptz",
    "Boolean": "bool",
    "LargeBinary": "bytea",
    "Float": "float8",
}


def _pg_types(table) -> list[str]:
    types = []
    for column in table.columns:
        sa_type = column.type
        variant = getattr(sa_type, "_variant_mapping", {}).get("postgresql", sa_type)
        types.append(_PG_TYPES[type(variant).__name__])
    return types


def copy_rows(conn: Connection, tables) -> None:
    """Binary COPY: no text formatting on our side nor parsing (e.g. of hex bytea) on the server's."""
    cursor = conn.connection.driver_connection.cursor()
    for table, rows in tables:
        if not rows:
            continue
        cols = ", ".join(c.name for c in table.columns)
        with cursor.copy(f"COPY {table.name} ({cols}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(_pg_types(table))
            write = copy.write_row
            for row in rows:
                write(row)


def drop_search_indexes_if_empty(engine) -> bool:
    """Initial load into an empty store: build the index tables' b-trees and the resource key once at the
    end, not row by row. True if the store was empty."""
    with engine.begin() as conn:
        if conn.execute(select(m.resource.c.rid).limit(1)).first() is not None:
            return False
        for table in REBUILT:
            for index in table.indexes:
                index.drop(conn, checkfirst=True)
        for key in DEFERRED_KEYS:
            conn.execute(DropConstraint(key, if_exists=True))
        for table in LOADED:
            conn.exec_driver_sql(f"ALTER TABLE {table.name} SET (autovacuum_enabled = false)")
    return True


# Tables autovacuum leaves alone during an initial load: fed a few thousand rows per chunk, they crossed its
# insert and analyze thresholds again and again, and it vacuumed and sampled them mid-load on the cores the
# load runs on (0.5-1 s of a 12 s load when it happened); the load ANALYZEs them once at its end.
LOADED = (m.version, m.resource, *TABLES.values())


# Tables whose (non-unique) indexes an initial load builds at its end.
REBUILT = (*TABLES.values(), m.resource)
# Unique keys an initial load builds at its end too: the shared record's (session, type, id). fhir_version's
# key stays and is the one that detects a conflicting writer: every writer, the loader and the API alike,
# inserts a version row under it (version 1 for a create, n+1 for an update) in the transaction that writes
# the resource row, so while it holds no two resource rows can share a key. Kept during the load, the
# resource key's b-tree cost ≈ 4 µs of PostgreSQL CPU per row (UUID ids land anywhere in it); built once
# after, ≈ 1.5 µs.
DEFERRED_KEYS: tuple[UniqueConstraint, ...] = tuple(
    c for c in m.resource.constraints if isinstance(c, UniqueConstraint) and c.name == "uq_fhir_resource_key"
)


BUILD_SETTINGS = (  # per connection: sort in memory, one core each (the builds themselves run in parallel)
    "SET maintenance_work_mem = '256MB'",
    "SET max_parallel_maintenance_workers = 0",
)


def ensure_search_indexes(engine, analyze: bool, phases: dict[str, float], parallel: int = 2) -> None:
    """(Re)create any index a previous (initial or interrupted) load dropped, and refresh statistics. One
    queue on `parallel` connections (a build is one core's work): builds biggest first, then ANALYZE of the
    tables, those without builds first, so no connection idles at the turn from builds to statistics."""
    with engine.begin() as conn:
        present = set(conn.exec_driver_sql(_INDEXES).scalars())
        size = dict(conn.exec_driver_sql(_SIZES).all())
        for table in LOADED:  # autovacuum back on (a no-op unless an initial load turned it off)
            conn.exec_driver_sql(f"ALTER TABLE {table.name} RESET (autovacuum_enabled)")
    by_size = sorted(LOADED, key=lambda t: -size.get(t.name, 0))
    rebuilt_tables = {table.name for table in REBUILT}
    missing = [
        index
        for table in by_size
        if table.name in rebuilt_tables
        for index in (*(k for k in DEFERRED_KEYS if k.table is table), *table.indexes)
        if index.name not in present
    ]
    rebuilt = {index.table.name for index in missing}
    started, built = time.perf_counter(), [time.perf_counter()]

    def build(index: Index | UniqueConstraint, conn: Connection) -> None:
        if isinstance(index, UniqueConstraint):
            conn.execute(AddConstraint(index))
        else:
            index.create(conn)
        built.append(time.perf_counter())

    tasks = [partial(build, index) for index in missing]
    if analyze:  # fresh statistics -> index plans
        tables = sorted(by_size, key=lambda t: t.name in rebuilt)  # stable: by size within each group
        tasks += [partial(_analyze, table.name) for table in tables]
    _run_parallel(engine, tasks, parallel)
    phases["index build"] += max(built) - started
    if analyze:
        phases["analyze"] += time.perf_counter() - max(built)


_INDEXES = "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()"
_SIZES = (
    "SELECT relname, pg_relation_size(oid) FROM pg_class"
    " WHERE relnamespace = current_schema()::regnamespace AND relkind = 'r'"
)


def _analyze(name: str, conn: Connection) -> None:
    conn.exec_driver_sql(f"ANALYZE {name}")


def _run_parallel(engine, tasks: list, parallel: int) -> None:
    """Run task(conn) for every task, on `parallel` autocommit connections taking the next task in turn."""
    queue = list(reversed(tasks))

    def drain() -> None:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            for statement in BUILD_SETTINGS:
                conn.exec_driver_sql(statement)
            while queue:
                try:
                    task = queue.pop()
                except IndexError:
                    return
                task(conn)

    with ThreadPoolExecutor(max(1, min(parallel, len(tasks)))) as pool:
        for future in [pool.submit(drain) for _ in range(max(1, min(parallel, len(tasks))))]:
            future.result()
