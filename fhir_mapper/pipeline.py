"""`run_map`: every mapper job over a MIMIC-IV folder, in-process or on N worker processes.

Each job reads the tables it needs (streaming) and writes its own profile files, so jobs share nothing
but the output folder; their reports are merged into summary.json. Jobs start largest-input first.
"""

from __future__ import annotations

import gc
import os
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

import orjson

from fhir_mapper import progress
from fhir_mapper.context import MapContext
from fhir_mapper.jobs import JOBS, Job
from fhir_mapper.output import NdjsonSink
from fhir_mapper.reader import table_path
from fhir_mapper.report import RunReport
from foundation.gcpause import gc_paused
from rounds.shards import ALL, Shard

EXIT_REJECTED = 3


def run_job(
    name: str, mimic: Path, out: Path, stride: int, group_limit: int = 100_000, shard: Shard = ALL
) -> RunReport:
    """Run one job (also the worker-process entry point).

    The cyclic collector is paused while the job runs and run once at its end: jobs build millions of
    acyclic dicts, lists and tuples, and with a large live heap (group-bys) the automatic passes cost a
    quarter of the CPU; tests/fhir_mapper/test_spill.py checks that jobs leave no cyclic garbage. That pass
    is a
    young one: with the collector paused, everything the job made is still in the youngest generation, so it
    finds the job's garbage without walking the rest of the process's heap (a caller's, in-process)."""
    report = RunReport()
    started = time.process_time()
    collecting = gc.isenabled()
    sink = NdjsonSink(out, report, stride)
    try:
        with gc_paused():
            JOBS[name].run(MapContext(mimic, sink, report, group_limit, shard=shard))
    except Exception as exc:  # one job's failure is reported; the other jobs still complete
        report.skipped_tables[f"job {name}"] = f"failed: {type(exc).__name__}: {exc}"
    finally:
        sink.close()
        if collecting:
            gc.collect(1)
        report.job_cpu[name] = time.process_time() - started
    return report


def _input_bytes(mimic: Path, job: Job) -> int:
    return sum(p.stat().st_size for t in job.tables if (p := table_path(mimic, t)) is not None)


def _runnable(mimic: Path, report: RunReport) -> list[Job]:
    jobs = []
    for job in JOBS.values():
        absent = [t for t in job.required if table_path(mimic, t) is None]
        if absent:
            report.missing_tables.update(absent)
            continue
        jobs.append(job)
    return sorted(jobs, key=lambda j: -_input_bytes(mimic, j))


def run_map(
    mimic: Path,
    out: Path,
    workers: int = 1,
    validate_stride: int = 0,
    group_limit: int = 100_000,
    shard: Shard = ALL,
) -> tuple[dict[str, Any], int]:
    """Map `mimic` into `out`; return (summary, exit code: 0, or EXIT_REJECTED if anything was rejected).

    `validate_stride` N validates every N-th resource per file (1 = all, 0 = none); `group_limit` is the
    number of values a group-by keeps in memory before spilling to disk. `shard` i/n maps only its patients'
    rows (and every shard the directory: rounds/shards.py), so n machines can each map one shard."""
    started = time.perf_counter()
    mimic, out = Path(mimic), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for stale in [*out.glob("Mimic*.ndjson"), out / "summary.json"]:  # never mix two runs' files
        stale.unlink(missing_ok=True)
    report = RunReport()
    if not (mimic / "hosp").is_dir():
        report.skipped_tables["hosp"] = f"{mimic}: no hosp/ folder (not a MIMIC-IV directory)"
    jobs = _runnable(mimic, report)
    bar = progress.Bar(sum(_input_bytes(mimic, j) for j in jobs), len(jobs))
    try:
        if workers <= 1:
            progress.set_hook(bar.advance)
            for job in jobs:
                report.merge(run_job(job.name, mimic, out, validate_stride, group_limit, shard))
                bar.job_done(job.name)
        else:
            counter = progress.shared_counter()
            pool = ProcessPoolExecutor(
                max_workers=min(workers, os.cpu_count() or 1, len(jobs) or 1),
                initializer=progress.install_counter,
                initargs=(counter,),
            )
            with pool:
                pending = {
                    pool.submit(run_job, j.name, mimic, out, validate_stride, group_limit, shard): j.name
                    for j in jobs
                }
                while pending:
                    finished, _ = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
                    bar.set(counter.value)
                    for future in finished:
                        report.merge(future.result())
                        bar.job_done(pending.pop(future))
    finally:
        progress.set_hook(None)
        bar.stop()
    summary = report.as_summary(time.perf_counter() - started)
    summary["workers"] = workers
    if shard.count > 1:
        summary["shard"] = str(shard)
    (out / "summary.json").write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    return summary, EXIT_REJECTED if report.any_rejected or summary["validation"]["failures"] else 0
