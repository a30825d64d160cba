"""`rounds demo` at its default size: wall time per stage and in all (goal: under 60 s on a 2-core machine).

    python benchmarks/bench_demo.py [--patients 8] [--sessions 16] [--mimic DIR]

Runs the same `run_demo` the command runs (synthesize → map → load → scenarios → baseline, oracle and weak
sessions in EN and ZH → scores → report.html) in a temporary folder on a fresh SQLite file, and prints each
stage's seconds, the total, the process's CPU seconds and the host's load average at the start and end (the
machine is shared: CPU seconds are the comparable figure).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rounds.demo import run_demo  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patients", type=int, default=8)
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--mimic", type=Path, default=None)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-demo-") as tmp:
        work = Path(tmp)
        result = run_demo(
            args.patients,
            args.seed,
            args.mimic,
            work / "w",
            f"sqlite:///{work / 'demo.sqlite'}",
            out=work / "out",
            sessions=args.sessions,
        )
    wall = time.perf_counter() - started
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    for stage, seconds in result.seconds.items():
        print(f"{stage:20s} {seconds:7.2f} s")
    print(f"{'total':20s} {wall:7.2f} s   (goal < 60 s)")
    print(
        f"cpu {cpu.ru_utime + cpu.ru_stime:.1f} s; load average {load_before:.1f} -> {os.getloadavg()[0]:.1f}"
    )
    for spec, report in result.reports.items():
        print(f"{spec:10s} Avg {report.metrics.avg:.3f}  sessions {report.metrics.sessions}")


if __name__ == "__main__":
    main()
