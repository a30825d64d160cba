#!/usr/bin/env python3
"""Bulk Data $export beside `rounds load`: NDJSON -> store (load resources/s), then store -> NDJSON through
the export writer (export resources/s), system level, then Patient/$export on a session.

    python benchmarks/bench_export.py [--database-url URL] [--ndjson DIR] [--workers N]

Without --ndjson the MIMIC-IV demo in ../shared/data is mapped first; without --database-url a fresh SQLite
file in a temporary folder is used. Prints both rates and the peak RSS of this process during the export
(the writer streams a page at a time, so it stays flat whatever the record's size).
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO.parent / "shared" / "data" / "mimic-iv-demo"


def _export(store, ctx, folder: Path, level: str = "system") -> tuple[int, float]:
    from services.fhir_api.bulk.export import run_export
    from services.fhir_api.bulk.jobs import ExportJob, JobStore
    from services.fhir_api.http.validation import served_types

    jobs = JobStore(folder)
    job = ExportJob(level, "bench", "2020-01-01T00:00:00Z")  # type: ignore[arg-type]
    jobs.create(job)
    started = time.perf_counter()
    run_export(store, ctx, jobs, job, served_types())
    seconds = time.perf_counter() - started
    done = jobs.load(job.id)
    assert done is not None and done.state == "completed", done and done.error
    return sum(o["count"] for o in done.output), seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--database-url")
    ap.add_argument("--ndjson", type=Path)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--mimic", type=Path, default=DEMO, help="the MIMIC-IV folder mapped without --ndjson")
    args = ap.parse_args()

    from rounds.migrate import upgrade
    from services.fhir_api.store.interface import Context
    from tests.wiring import load_on, store_on

    work = Path(tempfile.mkdtemp(prefix="bench-export-"))
    folder = args.ndjson
    if folder is None:
        from fhir_mapper.pipeline import run_map

        folder = work / "mapped"
        run_map(args.mimic, folder, workers=args.workers)
    url = args.database_url or f"sqlite:///{work / 'bench.sqlite'}"
    upgrade(url)
    report = load_on(url, folder, workers=args.workers)
    if not report.resources:
        raise SystemExit(f"nothing loaded from {folder} (--mimic / --ndjson)")
    print(f"load:   {report.resources:,} resources in {report.seconds:.1f}s = "
          f"{report.resources_per_s:,.0f} resources/s")
    store = store_on(url)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    count, seconds = _export(store, Context(), work / "jobs")
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss) / 1024
    print(f"export: {count:,} resources in {seconds:.1f}s = {count / seconds:,.0f} resources/s "
          f"(system level; peak RSS grew {grown:,.0f} MiB)")
    session = store.get_session(store.create_session(None))
    count, seconds = _export(store, session, work / "jobs", "patient")
    print(f"export: {count:,} resources in {seconds:.1f}s = {count / seconds:,.0f} resources/s "
          "(Patient/$export on a session)")


if __name__ == "__main__":
    main()
