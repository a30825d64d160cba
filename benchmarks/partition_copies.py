"""Copies of the FHIR store's large tables, partitioned or not, in a schema of their own (issue 43 item 5):
what `bench_partition.py` measures searches against, by pointing the store's connections at the schema
(`search_path = <schema>, public`: a table not copied is read from public, so the store's own SQL runs
unchanged against either layout).

Layouts (LAYOUTS, data): `plain` copies each large table as it is (the baseline for the time and size of a
build); `type` partitions by resource type — LIST on `res_type` for `fhir_resource`/`fhir_version`, and for
the index tables, which carry no type, LIST on `param_key` grouped by the type each key belongs to (keys are
hashes of (type, parameter): search/keys.py); `patient-hash` partitions by HASH of the one patient column the
schema has — the token rows' `patient_key` — and of the reference rows' `target_id`, the compartment key a
patient's search and `$everything` look up. Tables a layout names no key for stay in public.

Every index of the original is rebuilt on the copy (on a partitioned table, a unique index must hold the
partition key, so it is appended where missing), then the copy is ANALYZEd: the build's wall time is a proxy
for what the layout costs a bulk load, whose end is the same index builds.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from sqlalchemy import Connection, text

from services.fhir_api.search.keys import as_of_key, param_key
from services.fhir_api.search.registry import params_for, resource_types

SCHEMA_PREFIX = "pgpart_"


@dataclass(frozen=True)
class Scheme:
    """How one table is partitioned: `method` list (one partition per resource type) or hash."""

    method: str
    column: str


_BY_TYPE = Scheme("list", "res_type")
_BY_KEY_TYPE = Scheme("list", "param_key")
LAYOUTS: dict[str, dict[str, Scheme | None]] = {
    "plain": {},  # every large table, unpartitioned
    "type": {
        "fhir_resource": _BY_TYPE,
        "fhir_version": _BY_TYPE,
        **{f"fhir_idx_{kind}": _BY_KEY_TYPE
           for kind in ("token", "string", "date", "number", "quantity", "reference", "uri")},
    },
    "patient-hash": {"fhir_idx_token": Scheme("hash", "patient_key"),
                     "fhir_idx_reference": Scheme("hash", "target_id")},
}


@dataclass
class Built:
    """One table's copy: its build's phases (wall seconds) and its size on disk (bytes, indexes included)."""

    table: str
    partitions: int
    copy_s: float
    index_s: float
    analyze_s: float
    vacuum_s: float  # not part of a load's cost: for a like-with-like read (see `vacuum`)
    bytes: int


def schema_of(layout: str) -> str:
    return SCHEMA_PREFIX + layout.replace("-", "_")


def table_sizes(conn: Connection) -> dict[str, int]:
    """The store's tables (fhir_*) in public and their total size, largest first."""
    rows = conn.execute(text(
        "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n "
        "ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r' "
        "AND c.relname LIKE 'fhir\\_%' ORDER BY 2 DESC")).all()
    return {name: int(size) for name, size in rows}


def large_tables(sizes: dict[str, int], min_share: float) -> list[str]:
    """The tables holding at least `min_share` of the store's bytes (the resource, version and big index
    tables; the session table and small index tables are not worth a copy)."""
    total = sum(sizes.values()) or 1
    return [name for name, size in sizes.items() if size / total >= min_share]


def copied_tables(layout: str, large: list[str]) -> list[str]:
    """Which of the large tables `layout` copies into its schema (`plain`: all of them)."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}: one of {', '.join(LAYOUTS)}")
    schemes = LAYOUTS[layout]
    return [t for t in large if layout == "plain" or t in schemes]


def drop_copies(conn: Connection) -> None:
    """Drop every schema this module made (a run that was killed leaves its schema behind)."""
    names = conn.execute(text("SELECT nspname FROM pg_namespace WHERE nspname LIKE :p"),
                         {"p": SCHEMA_PREFIX.replace("_", "\\_") + "%"}).scalars().all()
    for name in names:
        conn.execute(text(f'DROP SCHEMA "{name}" CASCADE'))


def build_copy(conn: Connection, layout: str, tables: list[str], parts: int) -> list[Built]:
    """Create `layout`'s schema and copy `tables` into it (conn: autocommit)."""
    schema = schema_of(layout)
    conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    conn.execute(text("SET maintenance_work_mem = '256MB'"))  # what the loader's index builds get
    conn.execute(text("SET statement_timeout = 0"))
    return [_copy_table(conn, schema, table, LAYOUTS[layout].get(table), parts) for table in tables]


def _copy_table(conn: Connection, schema: str, table: str, scheme: Scheme | None, parts: int) -> Built:
    target = f'"{schema}".{table}'
    clause = f" PARTITION BY {scheme.method.upper()} ({scheme.column})" if scheme else ""
    conn.execute(text(f"CREATE TABLE {target} (LIKE public.{table} INCLUDING STATISTICS){clause}"))
    partitions = _partitions(conn, table, scheme, parts)
    for suffix, bound in partitions:
        conn.execute(text(f'CREATE TABLE "{schema}".{table}_{suffix} PARTITION OF {target} {bound}'))
    start = time.perf_counter()
    conn.execute(text(f"INSERT INTO {target} SELECT * FROM public.{table}"))
    copied = time.perf_counter()
    for definition in _index_definitions(conn, table):
        conn.execute(text(index_on_copy(definition, table, schema, scheme)))
    indexed = time.perf_counter()
    conn.execute(text(f"ANALYZE {target}"))
    analyzed = time.perf_counter()
    vacuum(conn, [target])
    size = conn.execute(text(  # a table that is not partitioned is its own one leaf
        "SELECT coalesce(sum(pg_total_relation_size(relid)), pg_total_relation_size(CAST(:t AS regclass))) "
        "FROM pg_partition_tree(CAST(:t AS regclass)) WHERE isleaf"), {"t": f"{schema}.{table}"}).scalar_one()
    return Built(table, len(partitions), copied - start, indexed - copied, analyzed - indexed,
                 time.perf_counter() - analyzed, int(size))


def vacuum(conn: Connection, tables: list[str]) -> None:
    """VACUUM: sets the visibility map, without which an index-only scan reads the heap page of every entry
    it returns — a fresh copy would lose to the loaded tables, which autovacuum has visited since the load,
    for that reason alone. Both sides are vacuumed before they are measured."""
    for table in tables:
        conn.execute(text(f"VACUUM {table}"))


def _partitions(conn: Connection, table: str, scheme: Scheme | None, parts: int) -> list[tuple[str, str]]:
    """(name suffix, bound) of each partition: one per hash remainder, or one per resource type with rows
    plus a DEFAULT one (rows written after the copy, keys no type claims)."""
    if scheme is None:
        return []
    if scheme.method == "hash":
        return [(f"p{i}", f"FOR VALUES WITH (MODULUS {parts}, REMAINDER {i})") for i in range(parts)]
    if scheme.column == "res_type":
        types = conn.execute(text("SELECT DISTINCT res_type FROM public.fhir_resource ORDER BY 1")).scalars()
        groups = {rtype: [_quoted(rtype)] for rtype in types}
    else:
        groups = {}
        for key, rtype in keys_by_type(conn, table).items():
            groups.setdefault(rtype, []).append(str(key))
    bounds = [(rtype.lower(), f"FOR VALUES IN ({', '.join(values)})")
              for rtype, values in sorted(groups.items())]
    return [*bounds, ("default", "DEFAULT")]


def _quoted(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def registry_keys() -> dict[int, str]:
    """param_key -> resource type for every parameter the generated table names (its own rows, its as-of
    rows, its `:identifier` rows)."""
    keys: dict[int, str] = {}
    for rtype in resource_types():
        for name in params_for(rtype):
            for key in (param_key(rtype, name), param_key(rtype, f"{name}:identifier")):
                keys[key] = keys[as_of_key(key)] = rtype
    return keys


def keys_by_type(conn: Connection, table: str) -> dict[int, str]:
    """The type of every param_key present in `table`: its distinct keys by a skip scan of the search b-tree
    (led by param_key), each named by the registry or, for keys it cannot name (a composite's per-code
    labels), by the type of one resource holding it."""
    present = conn.execute(text(
        f"WITH RECURSIVE k(key) AS (SELECT min(param_key) FROM public.{table} UNION ALL "
        f"SELECT (SELECT min(param_key) FROM public.{table} WHERE param_key > k.key) FROM k "
        f"WHERE k.key IS NOT NULL) SELECT key FROM k WHERE key IS NOT NULL")).scalars().all()
    known = registry_keys()
    found = {}
    for key in present:
        rtype = known.get(key) or conn.execute(text(
            f"SELECT r.res_type FROM public.{table} i JOIN public.fhir_resource r ON r.rid = i.rid "
            "WHERE i.param_key = :k LIMIT 1"), {"k": key}).scalar()
        if rtype:
            found[key] = rtype
    return found


def _index_definitions(conn: Connection, table: str) -> list[str]:
    return list(conn.execute(text(
        "SELECT indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename = :t ORDER BY indexname"
    ), {"t": table}).scalars())


_KEY = re.compile(r"^(?P<head>.* USING \w+ \()(?P<cols>[^)]*)(?P<tail>\).*)$")


def index_on_copy(definition: str, table: str, schema: str, scheme: Scheme | None) -> str:
    """The original index's definition on the copy; a unique index of a partitioned table must hold the
    partition key, so it is appended to the key columns where missing."""
    out = definition.replace(f" ON public.{table} ", f' ON "{schema}".{table} ', 1)
    if scheme is None or not out.startswith("CREATE UNIQUE INDEX"):
        return out
    match = _KEY.match(out)
    if match is None:
        raise ValueError(f"cannot read the key columns of {definition!r}")
    columns = [c.strip() for c in match["cols"].split(",")]
    if scheme.column not in columns:
        columns.append(scheme.column)
    return f"{match['head']}{', '.join(columns)}{match['tail']}"
