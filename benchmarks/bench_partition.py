"""Does declarative partitioning pay on the FHIR store? (issue 43 item 5)

    python benchmarks/bench_partition.py --url postgresql+psycopg://user@host:port/db
        [--by plain,type,patient-hash] [--parts 8] [--patients 20] [--rounds 5]
        [--budget-s 120] [--timeout-ms 60000] [--min-share 0.03] [--json FILE]

On a loaded store, each layout's copy of the large tables is built in a schema of its own
(benchmarks/partition_copies.py), measured, and dropped before the next (one copy on disk at a time: at
10,000 synthetic patients the large tables are most of the store's ~18 GB). The same requests run against the
plain tables (public) and each copy, in turn (group by group, round by round, so a neighbour's load on a
shared machine falls on both alike), through the store itself (its connections' `search_path` names the
copy's schema first): bench_growth's patient-scoped search MIX for the same seeded patients, the first page of
each patient's `$everything` (up to 1,000 resources) and type-wide searches. Per request it prints:
- client CPU (this process);
- server CPU, when the server runs on this host (user + system time of the store's backends, /proc);
- with pg_stat_statements loaded (shared_preload_libraries), its planning (if tracked) + execution time;
- always, from EXPLAIN (ANALYZE, BUFFERS) of every statement the requests ran (a second, untimed pass):
  planning and execution time and shared buffers (benchmarks/server_cost.py);
and per copy the build's wall time (copy, index builds, ANALYZE: a proxy for a bulk load's cost) and size.
The large tables in public are VACUUMed first, as each copy is (partition_copies.vacuum: the visibility map
decides what an index-only scan costs). Every request must return the same matches in the same order on
every layout (checked; a difference stops the run). The schemas are dropped at the end, also after a failure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import partition_copies as pc  # noqa: E402
from benchmarks.bench_growth import LABITEMS, MIX, SEARCH_PATIENTS  # noqa: E402
from benchmarks.server_cost import APP, RecordingCursor, ServerCost  # noqa: E402

TYPE_WIDE = [  # no patient: what a partition by type could prune to one type's rows
    ("Observation", [("code", f"{LABITEMS}|50912")]),
    ("Encounter", [("_sort", "-date")]),
    ("Condition", []),
]
EVERYTHING_PAGE = 1000
GROUPS = ("mix", "$everything", "type-wide")
TIMED_OUT = ["<timed out>"]


@dataclass(frozen=True)
class Limits:
    """How long the measurement of one layout may take: timed rounds per group, a group's budget of wall
    seconds (at least one round runs), and each statement's timeout."""

    rounds: int = 5
    budget_s: float = 120.0
    timeout_ms: int = 60_000


def open_store_on(url: str, schema: str | None, timeout_ms: int | None = None):
    """The store with its connections reading `schema` first (None: public, the plain tables); `timeout_ms`
    bounds each statement (a layout whose plan goes wrong must not hold the run for hours)."""
    from foundation.db import make_engine
    from services.fhir_api.store import open_store

    path = f"{schema},public" if schema else "public"
    options = f"-c search_path={path} -c application_name={APP}"
    engine = make_engine(url, connect_args={"options": options, "cursor_factory": RecordingCursor})
    return open_store(engine, query_timeout_ms=timeout_ms)


def requests(store, patients: list[str]) -> dict[str, list[tuple[str, Callable]]]:
    """The requests of each group: (label, call returning the ids in order)."""
    from services.fhir_api.store.interface import Context, SearchRequest

    ctx = Context()

    def search(rtype: str, params: list[tuple[str, str]]) -> Callable:
        return lambda: [r.id for r in store.search(ctx, SearchRequest(rtype, params, count=100)).matches]

    def everything(pid: str) -> Callable:
        return lambda: [r.id for r in store.everything(ctx, pid, count=EVERYTHING_PAGE).matches]

    return {
        "mix": [(f"{rtype}?patient={pid}&{params}", search(rtype, [("patient", pid), *params]))
                for pid in patients for rtype, params in MIX],
        "$everything": [(f"Patient/{pid}/$everything", everything(pid)) for pid in patients],
        "type-wide": [(f"{rtype}?{params}", search(rtype, params)) for rtype, params in TYPE_WIDE],
    }


def seeded_patients(url: str, n: int) -> list[str]:
    """bench_growth's patients: the same seeded sample of the store's Patient ids."""
    from services.fhir_api.store.interface import Context, SearchRequest

    store = open_store_on(url, None)
    try:
        found = store.search(Context(), SearchRequest("Patient", [], count=100_000)).matches
    finally:
        store.engine.dispose()
    return random.Random(0).sample(sorted(r.id for r in found), min(n, len(found)))


def measure(url: str, schemas: list[str | None], patients: list[str],
            limits: Limits) -> list[tuple[dict, dict]]:
    """({group: figures per request}, {request label: ids}) of each schema (None: public, the plain tables).
    The schemas take turns, group by group and round by round, so a neighbour's load on the shared machine
    falls on all of them alike. A group one of whose requests ran past the timeout on any schema (in the
    first, warming pass) is not timed; a group stops after the round that passes the time budget."""
    stores = [open_store_on(url, schema, limits.timeout_ms) for schema in schemas]
    costs = [ServerCost(url, schema, limits.timeout_ms) for schema in schemas]
    try:
        groups = [requests(store, patients) for store in stores]
        answers = [{label: answered(call) for calls in g.values() for label, call in calls} for g in groups]
        figures: list[dict] = [{} for _ in schemas]
        for group in GROUPS:
            late = sum(1 for a in answers for label, _ in groups[0][group] if a[label] == TIMED_OUT)
            if late:
                for out in figures:
                    out[group] = {"requests": 0, "timed_out": late, "timeout_ms": limits.timeout_ms}
                continue
            totals: list[dict[str, float | None]] = [{} for _ in schemas]
            start, done = time.perf_counter(), 0
            while done < limits.rounds and (not done or time.perf_counter() - start < limits.budget_s):
                for g, cost, total in zip(groups, costs, totals, strict=True):
                    cost.start()
                    cpu = time.process_time()
                    for _, call in g[group]:
                        call()
                    spent = {"client_cpu_ms": (time.process_time() - cpu) * 1e3, **cost.stop(1)}
                    for key, value in spent.items():
                        total[key] = None if value is None else (total.get(key) or 0.0) + value
                done += 1
            n = done * len(groups[0][group])
            for g, cost, total, out in zip(groups, costs, totals, figures, strict=True):
                out[group] = {"requests": n, **{k: None if v is None else v / n for k, v in total.items()},
                              **cost.explained([call for _, call in g[group]])}
        return list(zip(figures, answers, strict=True))
    finally:
        for cost in costs:
            cost.close()
        for store in stores:
            store.engine.dispose()


def answered(call: Callable[[], list[str]]) -> list[str]:
    """A request's matches, or TIMED_OUT."""
    from services.fhir_api.store.interface import QueryTimeout

    try:
        return call()
    except QueryTimeout:
        return TIMED_OUT


def differences(plain: dict[str, list[str]], other: dict[str, list[str]]) -> list[str]:
    """The requests whose matches (ids, in order) differ between two layouts (where both answered in time)."""
    late = lambda label: TIMED_OUT in (plain[label], other.get(label))  # noqa: E731
    return [label for label in plain if plain[label] != other.get(label) and not late(label)]


def run(url: str, layouts: list[str], parts: int, patients: int, limits: Limits, min_share: float) -> dict:
    from sqlalchemy import create_engine

    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    report: dict = {"layouts": {}}
    try:
        with admin.connect() as conn:
            pc.drop_copies(conn)
            sizes = pc.table_sizes(conn)
            large = pc.large_tables(sizes, min_share)
            pc.vacuum(conn, [f"public.{t}" for t in large])
        report["tables"] = {t: sizes[t] for t in large}
        chosen = seeded_patients(url, patients)
        for layout in layouts:
            tables = pc.copied_tables(layout, large)
            with admin.connect() as conn:
                built = pc.build_copy(conn, layout, tables, parts)
            (plain, answers), (figures, copied) = measure(url, [None, pc.schema_of(layout)], chosen, limits)
            wrong = differences(answers, copied)
            if wrong:
                raise SystemExit(f"layout {layout}: {len(wrong)} requests answer differently: {wrong[:3]}")
            report["layouts"][layout] = {"search": figures, "public": plain,
                                         "build": [asdict(b) for b in built]}
            print(lines(f"public, measured in turn with {layout}", plain), flush=True)
            print(lines(f"{layout} ({', '.join(tables)})", figures, built), flush=True)
            with admin.connect() as conn:
                pc.drop_copies(conn)
    finally:
        with admin.connect() as conn:
            pc.drop_copies(conn)
        admin.dispose()
    return report


def lines(title: str, figures: dict, built: list | None = None) -> str:
    """One layout's figures as a Markdown table (ms per request; buffers: 8 KiB pages per request)."""
    out = [f"## {title}",
           "| group | requests | client CPU ms | server CPU ms | pg_stat_statements plan+exec ms "
           "| EXPLAIN plan ms | EXPLAIN exec ms | EXPLAIN buffers |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for group, f in figures.items():
        if not f["requests"]:
            out.append(f"| {group} | {f['timed_out']} past {f['timeout_ms']:,} ms: not timed | | | | | | |")
            continue
        server = "n/a" if f.get("server_cpu_ms") is None else f"{f['server_cpu_ms']:.2f}"
        pgss = f"{f['pgss_plan_ms'] + f['pgss_exec_ms']:.2f}" if "pgss_exec_ms" in f else "n/a"
        explain = f"{f['explain_plan_ms']:.2f} | {f['explain_exec_ms']:.2f} | {f['explain_buffers']:.0f}"
        client = f"{f['client_cpu_ms']:.2f}"
        out.append(f"| {group} | {f['requests']} | {client} | {server} | {pgss} | {explain} |")
    for b in built or []:
        out.append(f"- {b.table}: {b.partitions or 'no'} partitions, copy {b.copy_s:.1f} s + indexes "
                   f"{b.index_s:.1f} s + ANALYZE {b.analyze_s:.1f} s (then VACUUM {b.vacuum_s:.1f} s), "
                   f"{b.bytes / 2**20:,.0f} MiB")
    return "\n".join(out)


def summary(report: dict) -> str:
    """Each layout against the plain tables measured in turn with it: server cost per request (×public) and
    the build of its copy."""
    out = ["| layout | group | server CPU ms | ×public | EXPLAIN plan+exec ms | ×public | build s | MiB |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]

    def ratio(a: float | None, b: float | None) -> str:
        return f"{a / b:.2f}" if a is not None and b else "n/a"

    for layout, figures in report["layouts"].items():
        base = figures["public"]
        built = figures.get("build", [])
        build = sum(b["copy_s"] + b["index_s"] + b["analyze_s"] for b in built)
        size = sum(b["bytes"] for b in built) / 2**20
        for group, f in figures["search"].items():
            if not f["requests"]:
                out.append(f"| {layout} | {group} | {f['timed_out']} requests past {f['timeout_ms']:,} ms "
                           f"| | | | {build:.1f} | {size:,.0f} |")
                continue
            cpu, plain_cpu = f.get("server_cpu_ms"), base[group].get("server_cpu_ms")
            explain = f["explain_plan_ms"] + f["explain_exec_ms"]
            plain_explain = base[group]["explain_plan_ms"] + base[group]["explain_exec_ms"]
            cpu_text = "n/a" if cpu is None else f"{cpu:.2f}"
            out.append(f"| {layout} | {group} | {cpu_text} | {ratio(cpu, plain_cpu)} | {explain:.2f} "
                       f"| {ratio(explain, plain_explain)} | {build:.1f} | {size:,.0f} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True, help="postgresql+psycopg://… of a loaded store")
    parser.add_argument("--by", default="plain,type,patient-hash",
                        help=f"layouts to build and measure, in order: {', '.join(pc.LAYOUTS)}")
    parser.add_argument("--parts", type=int, default=8, help="hash partitions (patient-hash)")
    parser.add_argument("--patients", type=int, default=SEARCH_PATIENTS)
    parser.add_argument("--rounds", type=int, default=5, help="timed passes over each group's requests")
    parser.add_argument("--budget-s", type=float, default=120.0,
                        help="no further round of a group once this many wall seconds have passed on it")
    parser.add_argument("--timeout-ms", type=int, default=60_000,
                        help="statement timeout: a group with a request past it is not timed on that layout")
    parser.add_argument("--min-share", type=float, default=0.03,
                        help="copy the tables holding at least this share of the store's bytes")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    args = parser.parse_args()
    if not args.url.startswith("postgresql"):
        parser.error("--url must be a PostgreSQL URL (postgresql+psycopg://…)")
    layouts = [x.strip().replace("_", "-") for x in args.by.split(",") if x.strip()]
    unknown = [x for x in layouts if x not in pc.LAYOUTS]
    if unknown or args.parts < 2:
        parser.error(f"--by takes {', '.join(pc.LAYOUTS)}; --parts at least 2 (got {unknown or args.parts})")
    limits = Limits(args.rounds, args.budget_s, args.timeout_ms)
    report = run(args.url, layouts, args.parts, args.patients, limits, args.min_share)
    report["load_average"] = os.getloadavg()[0]
    print(summary(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
