"""Bulk load NDJSON (the mapper's Mimic*.ndjson or official release files, plain or .gz) into the FHIR store.

Worker processes parse lines and extract index rows. On PostgreSQL each worker also writes its batch, in one
transaction of binary COPYs on its own connection; on SQLite the main process is the one writer (batched
inserts). Idempotent and resumable: a batch skips resources already in the shared record, and every committed
batch is complete, so re-running after a crash finishes the job. The loader's CPU is mostly index extraction
(search/extract.py, search/codegen.py) and COPY formatting; the database's is the COPY and, after an initial
load, the index builds and ANALYZE (load_postgres.py). `LoadReport.phases` says where the time went.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

import orjson
from sqlalchemy import Connection, Engine, func, select

from foundation.db import SQLITE_BEGIN, insert_rows
from foundation.gcpause import gc_paused
from rounds.shards import ALL, Shard
from services.fhir_api.load_files import AHEAD, bounded, chunks, ndjson_files, patient_of
from services.fhir_api.load_postgres import copy_rows, drop_search_indexes_if_empty, ensure_search_indexes
from services.fhir_api.store import models as m
from services.fhir_api.store.indexing import TABLES, row_tuples
from services.fhir_api.store.interface import InvalidResource
from services.fhir_api.store.known_time import clinical_time
from services.fhir_api.store.timing import settle_times

BATCH = 5000  # lines per worker transaction: fewer round trips and COPY starts (~10 % faster than 2,000)
INDEX_KINDS = tuple(TABLES)
_META = re.compile(rb'"meta"\s*:\s*\{')
PHASES = ("parse+extract", "copy", "index build", "analyze", "settle times")


@dataclass
class LoadReport:
    resources: int = 0  # newly written
    skipped: int = 0  # already present (idempotent re-run)
    errors: int = 0  # unparsable or (with validate) invalid lines
    seconds: float = 0.0
    files: list[str] = field(default_factory=list)
    error_samples: list[str] = field(default_factory=list)
    # where the time went: CPU seconds summed over workers for parse+extract / copy (client side of the
    # writes), wall seconds for the end-of-load index build and analyze
    phases: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))

    @property
    def resources_per_s(self) -> float:
        return self.resources / self.seconds if self.seconds else 0.0


def _with_meta(line: bytes, resource: dict, stamp: bytes) -> bytes:
    """Set meta.versionId/lastUpdated keeping every other byte of the line as it was written."""
    meta = resource.get("meta")
    if meta is None:
        return b'{"meta":{' + stamp + b"}," + line[1:]
    if type(meta) is dict and "versionId" not in meta and "lastUpdated" not in meta and _meta_leads(resource):
        at = line.find(b'"meta"')  # then the first "meta" key is the top one
        if at >= 0 and line[at + 6 : at + 8] == b":{":  # compact JSON: what _META would match, found faster
            end = at + 8
        else:
            match = _META.search(line)
            end = match.end() if match else -1
        if end >= 0:
            view = memoryview(line)
            return b"".join((view[:end], stamp, b"," if meta else b"", view[end:]))
    resource["meta"] = {**(meta or {}), **orjson.loads(b"{" + stamp + b"}")}
    return orjson.dumps(resource)


def _meta_leads(resource: dict) -> bool:
    """Only resourceType and id come before meta (so no other "meta" key can come first in the text)."""
    for key in resource:
        if key == "meta":
            return True
        if key != "resourceType" and key != "id":
            return False
    return False


def _prepare(args: tuple, known=None) -> tuple[list[tuple], list[str], int, dict[str, float]]:
    """Parse a chunk's lines -> items (type, id, raw, clinical time, index rows by kind), errors ('file:line:
    reason'), how many were skipped because `known(keys)` says they are already stored (re-runs skip the
    costly indexing), and the CPU seconds spent. Without `known` (an initial load) each line is indexed right
    after it is parsed, while its ~100 fresh objects are still in the CPU cache, and then freed: parsing the
    whole chunk first and indexing it after cost ~25 % more, every object being fetched from memory again."""
    chunk, when, validate = args[:3]
    rules = _LineRules.of(when, validate, Path(chunk.path).name, args[5] if len(args) > 5 else ALL)
    out: list[tuple] = []
    errors: list[str] = []
    present: set[tuple[str, str]] = set()
    with gc_paused():
        started = time.process_time()
        numbered = enumerate(chunk.read(), chunk.first_line)
        if known is None:
            for number, line in numbered:
                if line and (parsed := _parse(line, number, rules, errors)) is not None:
                    _index(parsed, rules, out, errors)
        else:
            batch = [p for n, line in numbered if line and (p := _parse(line, n, rules, errors)) is not None]
            present = known([(p[0], p[1]) for p in batch]) if batch else set()
            for parsed in batch:
                if (parsed[0], parsed[1]) not in present:
                    _index(parsed, rules, out, errors)
    return out, errors, len(present), {"parse+extract": time.process_time() - started}


class _LineRules(NamedTuple):
    """How each line of a chunk is handled: the meta stamp spliced into it (versionId 1, the load's
    lastUpdated, as JSON text), whether it is validated, and the file its errors name."""

    stamp: bytes
    validate: bool
    file: str
    shard: Shard  # the lines of other shards' patients are passed over (rounds/shards.py)

    @classmethod
    def of(cls, when: str, validate: bool, file: str, shard: Shard = ALL) -> _LineRules:
        return cls(b'"versionId":"1","lastUpdated":"' + when.encode() + b'"', validate, file, shard)

    def error(self, number: int, exc: Exception) -> str:
        return f"{self.file}:{number}: {type(exc).__name__}: {str(exc)[:200]}"


Parsed = tuple[str, str, bytes, dict, int]  # type, id, line, resource, line number


def _parse(line: bytes, number: int, rules: _LineRules, errors: list[str]) -> Parsed | None:
    """The parsed line, or None with the reason appended to errors."""
    try:
        resource = orjson.loads(line)
        rtype, rid = resource["resourceType"], resource["id"]
        if not isinstance(rtype, str) or not isinstance(rid, str):
            raise ValueError("resourceType/id must be strings")
        if rules.shard.count > 1 and not rules.shard.holds(patient_of(rtype, rid, resource)):
            return None
        return rtype, rid, line, resource, number
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        errors.append(rules.error(number, exc))
        return None


def _index(parsed: Parsed, rules: _LineRules, out: list[tuple], errors: list[str]) -> None:
    """Append the stored item of one parsed line to out (or its error to errors)."""
    rtype, rid, line, resource, number = parsed
    try:
        if rules.validate:
            from services.fhir_api.store.validation import validate_resource

            validate_resource(resource)
        raw = _with_meta(line, resource, rules.stamp)  # indexes nothing: _lastUpdated is read off the row
        out.append((rtype, rid, raw, clinical_time(resource), row_tuples(resource, timed=True)))
    except (TypeError, ValueError, InvalidResource) as exc:
        errors.append(rules.error(number, exc))


_EXISTING_PG = (
    "SELECT r.res_type, r.res_id FROM unnest(%s::text[], %s::text[]) AS k(t, i)"
    f" JOIN fhir_resource r ON r.session = {m.SHARED_RECORD_SQL} AND r.res_type = k.t AND r.res_id = k.i"
)


def _existing(conn: Connection, items) -> set[tuple[str, str]]:
    """The (type, id) of items already in the shared record (one indexed lookup per key on PostgreSQL)."""
    if conn.dialect.name == "postgresql":
        types, ids = [it[0] for it in items], [it[1] for it in items]
        return {tuple(x) for x in conn.exec_driver_sql(_EXISTING_PG, (types, ids))}
    by_type: dict[str, list[str]] = {}
    for item in items:
        by_type.setdefault(item[0], []).append(item[1])
    found = set()
    for rtype, ids in by_type.items():
        for at in range(0, len(ids), PROBE):
            probe = (rtype, *ids[at : at + PROBE], *ids[-1:] * (at + PROBE - len(ids)))
            found.update(map(tuple, conn.exec_driver_sql(_EXISTING_SQLITE, probe)))
    return found


PROBE = 500  # ids per SQLite probe, padded with the last: one SQL text, prepared once. One IN list per batch
# length kept ~0.8 MB each in pysqlite's cache of 128 statements: RSS grew with the batches (+~100 MB).
_EXISTING_SQLITE = (
    f"SELECT res_type, res_id FROM fhir_resource WHERE session = {m.SHARED_RECORD_SQL} AND res_type = ?"
    f" AND res_id IN ({', '.join('?' * PROBE)})"
)

_SEQUENCES = (
    "SELECT pg_get_serial_sequence('fhir_version', 'seq'), pg_get_serial_sequence('fhir_resource', 'rid')"
)
_NEXTVALS = (  # one row of two arrays, read in binary: no per-value row objects
    "SELECT array_agg(nextval(%s::regclass)), array_agg(nextval(%s::regclass)) FROM generate_series(1, %s)"
)


def _allocate(conn: Connection, n: int) -> tuple[list[int], list[int]]:
    """n fresh fhir_version.seq and fhir_resource.rid values."""
    if conn.dialect.name == "postgresql":  # sequence names resolved once, not per value
        names = conn.exec_driver_sql(_SEQUENCES).one()
        cursor = conn.connection.driver_connection.cursor(binary=True)
        seqs, rids = cursor.execute(_NEXTVALS, (*names, n)).fetchone()
        return seqs, rids
    seq0 = conn.execute(select(func.coalesce(func.max(m.version.c.seq), 0))).scalar_one()
    rid0 = conn.execute(select(func.coalesce(func.max(m.resource.c.rid), 0))).scalar_one()
    return list(range(seq0 + 1, seq0 + n + 1)), list(range(rid0 + 1, rid0 + n + 1))


def _write(conn: Connection, items: list[tuple], when: datetime, check: bool = True) -> int:
    """Write the items not stored yet (all of them unchecked: the unique keys reject a conflict)."""
    present = _existing(conn, items) if check else set()
    fresh, seen = [], set()
    for item in items:
        if (key := item[:2]) not in present and key not in seen:
            seen.add(key)
            fresh.append(item)
    if not fresh:
        return 0
    seqs, rids = _allocate(conn, len(fresh))
    versions = [
        (s, "", it[0], it[1], 1, when, "PUT", False, it[2]) for s, it in zip(seqs, fresh, strict=True)
    ]
    current = [
        (r, "", it[0], it[1], 1, s, s, when, False, it[3]) for r, s, it in zip(rids, seqs, fresh, strict=True)
    ]
    index: dict[str, list[tuple]] = {k: [] for k in INDEX_KINDS}
    for rid, it in zip(rids, fresh, strict=True):
        prepend = (rid,).__add__  # (rid, *row) per row without a comprehension's frame per resource and kind
        for kind, rows in it[4].items():
            if rows:  # most kinds are empty for a given resource
                index[kind].extend(map(prepend, rows))
    tables = [(m.version, versions), (m.resource, current)] + [(TABLES[k], index[k]) for k in INDEX_KINDS]
    if conn.dialect.name == "postgresql":
        copy_rows(conn, tables)
    else:
        for table, rows in tables:
            insert_rows(conn, table, rows)
    return len(fresh)


_ENGINES: dict[str, object] = {}


def _prepare_and_write(args: tuple) -> tuple[int, int, list[str]]:
    """Worker (PostgreSQL): parse, index and COPY one batch on the worker's own connection, made once per
    worker process with the factory the composition root handed `load_ndjson`."""
    factory, url = args[3]
    engine = _ENGINES.get(url)
    if engine is None:
        engine = _ENGINES[url] = factory(url, pool_size=1, max_overflow=0)  # PostgreSQL only
    return _in_batch(_write_here, engine, args)


def _in_batch(fn, *args):
    """fn(*args) with the cycle collector paused until fn's frame, and with it the batch, is gone. A batch
    allocates ~100 acyclic objects per resource: collector passes over them cost more than a third of the
    loader's CPU, and re-enabled while they live, its first pass would walk them all."""
    with gc_paused():
        return fn(*args)


def _write_here(engine, args: tuple) -> tuple[int, int, list[str], dict[str, float]]:
    """Parse and index what is not stored yet, then write it in one transaction. An initial load (args[4])
    into an empty store asks nothing; on PostgreSQL the write is optimistic (see `_write_prepared`)."""
    when = datetime.fromisoformat(args[1].replace("Z", "+00:00"))
    optimistic = engine.dialect.name == "postgresql"
    if optimistic and len(args) > 4 and args[4]:
        return _write_prepared(engine, _prepare(args), when, optimistic)
    with engine.connect() as peek:
        prepared = _prepare(args, known=lambda keys: _existing(peek, keys))
    return _write_prepared(engine, prepared, when, optimistic)


def load_ndjson(
    engine: Engine,
    folder: str | Path,
    *,
    workers: int | None = None,
    progress: bool = False,
    validate: bool = False,
    shard: Shard = ALL,
    engine_factory: Callable[..., Engine] | None = None,
) -> LoadReport:
    """Load every *.ndjson / *.ndjson.gz in folder into the shared record on the process's `engine` (schema
    must exist); with a `shard` i/n, only its patients' resources and the directory (what belongs to no
    patient), so n processes can load one folder into one store, each its shard. Worker processes writing
    to PostgreSQL make their own engine with `engine_factory` (the root's); without it they only parse."""
    report = LoadReport(files=[p.name for p in ndjson_files(Path(folder))])
    workers = workers or default_workers()
    start = time.perf_counter()
    when = datetime.now(UTC).replace(microsecond=0)
    stamp = when.isoformat().replace("+00:00", "Z")
    postgres = engine.dialect.name == "postgresql"
    files = ndjson_files(Path(folder))
    bar = _progress(progress)
    pool = multiprocessing.get_context("fork").Pool(workers) if workers > 1 else None
    try:
        initial = postgres and drop_search_indexes_if_empty(engine)  # empty store: nothing to ask
        jobs = (
            (chunk, stamp, validate, (engine_factory, engine.url.render_as_string(hide_password=False)),
             initial, shard)
            for path in files
            for chunk in chunks(path, BATCH)
        )
        if pool and postgres and engine_factory:  # every worker parses, indexes and COPYs on its own
            # connection
            results = bounded(pool, _prepare_and_write, jobs, AHEAD * workers)
        elif pool:  # SQLite has one writer: workers parse and index, the main process writes
            prepared = bounded(pool, _prepare, jobs, AHEAD * workers)
            results = (_write_prepared(engine, p, when) for p in prepared)
        else:
            results = (_in_batch(_write_here, engine, job) for job in jobs)
        for written, skipped, errors, phases in results:
            for phase, seconds in phases.items():
                report.phases[phase] += seconds
            report.resources += written
            report.skipped += skipped
            report.errors += len(errors)
            report.error_samples.extend(errors[: max(0, 5 - len(report.error_samples))])
            if bar:
                bar.update(bar.task_ids[0], advance=written + skipped)
    finally:
        if pool:
            pool.close()
            pool.join()
        if bar:
            bar.stop()
        if postgres:
            ensure_search_indexes(engine, report.resources > 0, report.phases)
        if report.resources and sys.exc_info()[0] is None:  # inherited and reference times (store/timing.py)
            settled = time.perf_counter()
            with engine.begin() as conn:
                settle_times(conn)
            report.phases["settle times"] += time.perf_counter() - settled
    report.seconds = time.perf_counter() - start
    return report


def default_workers() -> int:
    """One more worker than cores: each worker alternates its own CPU work (parse, extract, COPY rows) with
    waiting while PostgreSQL takes its COPY in, and a spare keeps the cores busy through those waits (2 cores,
    MIMIC demo: 3 workers 22.0-22.9 k resources/s, 2 workers 19.4-20.2 k, alternating runs)."""
    return (os.cpu_count() or 2) + 1


def _write_prepared(
    engine, prepared: tuple, when: datetime, optimistic: bool = False
) -> tuple[int, int, list[str], dict[str, float]]:
    """Write one prepared batch in one transaction. Optimistic: without asking which items are stored (an
    initial load, or just asked); if a unique key says one is (a concurrent writer or a duplicate line), the
    transaction rolls back and the batch is written again, checked."""
    items, errors, skipped, phases = prepared
    if not items:
        return 0, skipped, errors, phases
    started = time.process_time()
    with gc_paused():
        try:
            with _writing(engine) as conn:
                written = _write(conn, items, when, check=not optimistic)
        except Exception as exc:
            if not optimistic or _sqlstate(exc) != UNIQUE_VIOLATION:
                raise
            with _writing(engine) as conn:
                written = _write(conn, items, when)
    phases["copy"] = time.process_time() - started
    return written, skipped + len(items) - written, errors, phases


UNIQUE_VIOLATION = "23505"


@contextmanager
def _writing(engine) -> Iterator[Connection]:
    """A write transaction. On SQLite it takes the write lock first (BEGIN IMMEDIATE): the batch reads the
    highest seq and rid and writes after them, which another loader (a `--shard` of the same store) must
    not do in between; the other one waits (busy timeout) instead."""
    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            conn.info[SQLITE_BEGIN] = "BEGIN IMMEDIATE"
        with conn.begin():
            yield conn


def _sqlstate(exc: BaseException) -> str | None:
    """SQLSTATE of a psycopg error, raw (COPY on the driver cursor) or wrapped by SQLAlchemy."""
    return getattr(exc, "sqlstate", None) or getattr(getattr(exc, "orig", None), "sqlstate", None)


def _progress(enabled: bool):
    if not enabled:
        return None
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    bar = Progress(SpinnerColumn(), TextColumn("{task.completed:,.0f} resources loaded"), TimeElapsedColumn())
    bar.add_task("load", total=None)
    bar.start()
    return bar
