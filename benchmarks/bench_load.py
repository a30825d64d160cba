#!/usr/bin/env python3
"""Bulk-load benchmark: NDJSON -> FHIR store (prints resources/s), then patient-scoped search latencies.

    python benchmarks/bench_load.py --database-url postgresql+psycopg://rounds@127.0.0.1:5432/bench \
        [--ndjson DIR] [--workers N]

Without --ndjson the MIMIC-IV demo in ../shared/data is mapped first (rounds map) into a temporary folder.
The target database should be empty (a re-run measures the idempotent skip path instead).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO.parent / "shared" / "data" / "mimic-iv-demo"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--database-url", required=True)
    ap.add_argument("--ndjson", type=Path)
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()

    from rounds.migrate import upgrade
    from services.fhir_api.load import load_ndjson

    folder = args.ndjson
    if folder is None:
        from fhir_mapper.pipeline import run_map

        folder = Path(tempfile.mkdtemp(prefix="bench-load-"))
        started = time.perf_counter()
        run_map(DEMO, folder, workers=args.workers or 2)
        print(f"mapped demo in {time.perf_counter() - started:.1f}s -> {folder}")
    upgrade(args.database_url)
    cpu = _cpu_seconds()
    report = load_ndjson(args.database_url, folder, workers=args.workers, progress=True)
    cpu = _cpu_seconds() - cpu
    print(
        f"load: {report.resources:,} resources in {report.seconds:.1f}s = {report.resources_per_s:,.0f} "
        f"resources/s ({report.skipped:,} skipped, {report.errors:,} errors); loader CPU (this process and "
        f"its workers, not the database server) {cpu / max(1, report.resources) * 1e6:,.0f} µs/resource"
    )
    _latencies(args.database_url)


def _cpu_seconds() -> float:
    """User + system CPU of this process and its finished children (the loader's worker processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _latencies(url: str) -> None:
    from sqlalchemy import select

    from services.fhir_api.store import models as m
    from services.fhir_api.store import open_store
    from services.fhir_api.store.interface import Context, SearchRequest

    store = open_store(url)
    with store.engine.connect() as conn:
        patients = list(
            conn.execute(
                select(m.resource.c.res_id).where(m.resource.c.res_type == "Patient").limit(20)
            ).scalars()
        )
    queries = [
        ("Observation", [("category", "laboratory"), ("_sort", "-date")]),
        ("Observation", [("date", "ge2150-01-01")]),
        ("Encounter", []),
        ("MedicationRequest", []),
        ("Condition", []),
    ]
    timings: dict[str, list[float]] = {}
    for pid in patients:
        for rtype, params in queries:
            started = time.perf_counter()
            store.search(Context(), SearchRequest(rtype, [("patient", pid), *params], count=20))
            timings.setdefault(rtype + "?" + "&".join(p for p, _ in params), []).append(
                time.perf_counter() - started
            )
        started = time.perf_counter()
        store.read(Context(), "Patient", pid)
        timings.setdefault("read Patient", []).append(time.perf_counter() - started)
    for name, values in timings.items():
        values.sort()
        print(f"{name:45s} p50 {statistics.median(values) * 1000:7.1f} ms  max {values[-1] * 1000:7.1f} ms")
    store.engine.dispose()


if __name__ == "__main__":
    main()
