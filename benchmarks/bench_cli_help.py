"""`rounds --help` wall time (goal: at most 0.3 s), beside the interpreter's own start-up on this machine.

Runs `python -m rounds.cli --help` and `python -c pass` N times each in fresh processes and prints the best
and the median wall seconds, then the modules the help imports that take longest (`-X importtime`). The
best of N is the figure: on a shared machine the others measure the neighbours (the CPU seconds of the
child, also printed, are less sensitive to them). `--code DIR` times another
checkout (e.g. `git archive <commit> | tar -x -C DIR`) for a before/after.

    python benchmarks/bench_cli_help.py [--runs 15] [--code DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOAL_S = 0.3
HELP = ["-m", "rounds.cli", "--help"]


def timed(argv: list[str], code: Path, runs: int) -> tuple[list[float], list[float]]:
    """Wall seconds and CPU seconds (user + system of the child) of each of `runs` fresh processes."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(argv, cwd=code, env=env, check=True, stdout=subprocess.DEVNULL)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return walls, cpus


def slowest_imports(code: Path, top: int = 8) -> list[tuple[int, str]]:
    """(cumulative µs, module) of the help's slowest imports, from one `-X importtime` run."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "rounds.cli", "--help"], cwd=code,
                          env={**os.environ, "PYTHONPATH": str(code)}, capture_output=True, text=True)
    rows = []
    for line in done.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].strip()))
    return sorted(rows, reverse=True)[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--code", type=Path, default=REPO, help="the checkout to time (default: this one)")
    args = parser.parse_args()
    code = args.code.resolve()
    print(f"code: {code}; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; {args.runs} runs")
    for label, argv in (("python -c pass", ["-c", "pass"]), ("python -m rounds.cli --help", HELP)):
        walls, cpus = timed([sys.executable, *argv], code, args.runs)
        met = "met" if min(walls) <= GOAL_S else "NOT met"
        verdict = f"   goal ≤ {GOAL_S} s: {met}" if argv is HELP else ""
        print(f"{label:28} wall best {min(walls):.3f} s, median {statistics.median(walls):.3f} s; "
              f"CPU best {min(cpus):.3f} s{verdict}")
    print("slowest imports of the help (cumulative ms):")
    for micros, module in slowest_imports(code):
        print(f"  {micros / 1000:8.1f}  {module}")


if __name__ == "__main__":
    main()
