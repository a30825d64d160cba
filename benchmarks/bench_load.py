#!/usr/bin/env python3
"""Bulk-load benchmark: NDJSON -> FHIR store (prints resources/s), then patient-scoped search latencies.

    python benchmarks/bench_load.py --database-url postgresql+psycopg://rounds@127.0.0.1:5432/bench \
        [--ndjson DIR] [--workers N]

Without --ndjson the MIMIC-IV demo in ../shared/data is mapped first (rounds map) into a temporary folder.
The target database should be empty (a re-run measures the idempotent skip path instead).
Prints resources/s, CPU µs per resource of the loader (this process and its workers) and of the PostgreSQL
backends serving the load (sampled when the server runs on this machine), and where the time went:
worker CPU in parse+extract / copy (client side of the writes), wall seconds of the index build and ANALYZE.
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import statistics
import tempfile
import threading
import time
from pathlib import Path

import psutil
from sqlalchemy import create_engine, text

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO.parent / "shared" / "data" / "mimic-iv-demo"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--database-url", required=True)
    ap.add_argument("--ndjson", type=Path)
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()

    from rounds.migrate import upgrade
    from tests.wiring import load_on

    folder = args.ndjson
    if folder is None:
        from fhir_mapper.pipeline import run_map

        folder = Path(tempfile.mkdtemp(prefix="bench-load-"))
        started = time.perf_counter()
        run_map(DEMO, folder, workers=args.workers or 2)
        print(f"mapped demo in {time.perf_counter() - started:.1f}s -> {folder}")
    upgrade(args.database_url)
    backends = BackendCpu(args.database_url).start()
    cpu = _cpu_seconds()
    report = load_on(args.database_url, folder, workers=args.workers, progress=True)
    server = backends.stop()
    cpu = _cpu_seconds() - cpu - backends.own_cpu
    per = 1e6 / max(1, report.resources)
    print(
        f"load: {report.resources:,} resources in {report.seconds:.1f}s = {report.resources_per_s:,.0f} "
        f"resources/s ({report.skipped:,} skipped, {report.errors:,} errors)\n"
        f"CPU per resource: loader (this process and its workers) {cpu * per:,.0f} µs, PostgreSQL backends "
        f"{server * per:,.0f} µs, total {(cpu + server) * per:,.0f} µs"
    )
    for phase, seconds in report.phases.items():
        kind = "worker CPU" if phase in ("parse+extract", "copy") else "wall"
        print(f"  {phase:12s} {seconds:7.1f} s {kind:10s} = {seconds * per:6.1f} µs/resource")
    _latencies(args.database_url)


class BackendCpu:
    """CPU seconds of the PostgreSQL backends connected to the database, sampled every 0.2 s (each backend's
    last sample counts: a worker's backend ends with its connection). Zero if the server is elsewhere."""

    def __init__(self, database_url: str) -> None:
        self.engine = create_engine(database_url)
        self.seen: dict[int, float] = {}
        self.own_cpu = 0.0
        self.base: dict[int, float] = {}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        with self.engine.connect() as conn:
            pids = conn.execute(
                text("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
            ).scalars()
            for pid in pids:
                with contextlib.suppress(psutil.Error):
                    times = psutil.Process(pid).cpu_times()
                    self.seen[pid] = times.user + times.system

    def _run(self) -> None:
        while not self.done.wait(0.2):
            self._sample()
        self.own_cpu = time.thread_time()  # the sampling itself, not the loader's: subtracted by the caller

    def start(self) -> BackendCpu:
        self._sample()
        self.base = dict(self.seen)
        self.thread.start()
        return self

    def stop(self) -> float:
        self.done.set()
        self.thread.join()
        self._sample()
        self.engine.dispose()
        return sum(t - self.base.get(pid, 0.0) for pid, t in self.seen.items())


def _cpu_seconds() -> float:
    """User + system CPU of this process and its finished children (the loader's worker processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _latencies(url: str) -> None:
    from sqlalchemy import select

    from services.fhir_api.store import models as m
    from services.fhir_api.store.interface import Context, SearchRequest
    from tests.wiring import store_on

    store = store_on(url)
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
