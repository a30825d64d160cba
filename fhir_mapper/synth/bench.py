"""Benchmark of the generator: `python -m fhir_mapper.synth.bench [--patients 1000] [--labs 1000000]`.

Prints wall time, rows written and rows/s for N patients, peak RSS at 200 and 2,000 patients (it must stay
flat), and the smallest patient count whose labevents reach the lab target — the size of the synthetic set
the mapper benchmark needs. Each run is a fresh process, so peak RSS is its own.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import math
import subprocess
import sys
import tempfile
from collections import Counter
from itertools import accumulate
from pathlib import Path

RUN = """
import json, resource, sys, time
from pathlib import Path
from fhir_mapper.synth import generate
t0, c0 = time.perf_counter(), time.process_time()
counts = generate(Path(sys.argv[1]), int(sys.argv[2]), seed=int(sys.argv[3]))
print(json.dumps({"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0,
                  "counts": counts,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run(patients: int, seed: int = 0, labs_per_patient: bool = False) -> dict:
    with tempfile.TemporaryDirectory(prefix="rounds-synth-bench-") as out:
        done = subprocess.run(
            [sys.executable, "-c", RUN, out, str(patients), str(seed)],
            capture_output=True,
            text=True,
            check=True,
        )
        result = json.loads(done.stdout)
        result["bytes"] = sum(p.stat().st_size for p in Path(out).rglob("*.gz"))
        if labs_per_patient:  # patient i is the i-th subject_id, whatever N is
            with gzip.open(Path(out) / "hosp" / "labevents.csv.gz", "rt", newline="") as handle:
                per_subject = Counter(row["subject_id"] for row in csv.DictReader(handle))
            result["labs_per_patient"] = [per_subject[s] for s in sorted(per_subject, key=int)]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patients", type=int, default=1000)
    parser.add_argument("--labs", type=int, default=1_000_000, help="lab rows the sizing search must reach")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sizing-only", action="store_true", help="only search the patient count for --labs")
    args = parser.parse_args()

    if not args.sizing_only:
        report_runs(args.patients, args.seed)
    size_for_labs(args.labs, args.seed)


def report_runs(n: int, seed: int) -> None:
    main_run = run(n, seed)
    rows = sum(main_run["counts"].values())
    print(
        f"{n} patients: {main_run['seconds']:.1f} s wall ({main_run['cpu_seconds']:.1f} s CPU), "
        f"{rows:,} rows ({rows / main_run['seconds']:,.0f} rows/s wall, "
        f"{rows / main_run['cpu_seconds']:,.0f} rows/s CPU), {main_run['bytes'] / 2**20:.1f} MiB gzip, "
        f"peak RSS {main_run['peak_rss_mib']:.0f} MiB"
    )
    for table in ("hosp/labevents", "icu/chartevents", "hosp/emar", "hosp/admissions", "note/discharge"):
        print(f"  {table:20s} {main_run['counts'][table]:>10,}")

    small, large = run(200, seed), run(2000, seed)
    print(
        f"peak RSS: 200 patients {small['peak_rss_mib']:.0f} MiB, "
        f"2,000 patients {large['peak_rss_mib']:.0f} MiB "
        f"(growth {large['peak_rss_mib'] - small['peak_rss_mib']:.1f} MiB)"
    )


def size_for_labs(target: int, seed: int) -> None:
    """The smallest N whose first N patients reach `target` lab rows. Exact, because patient i's rows do not
    depend on N: one generous run, then a running sum of lab rows per patient; a second run of N confirms."""
    rate = run(500, seed)["counts"]["hosp/labevents"] / 500
    per_patient = run(math.ceil(target / rate * 1.05), seed, labs_per_patient=True)["labs_per_patient"]
    reached = [(n, total) for n, total in enumerate(accumulate(per_patient), start=1) if total >= target]
    if not reached:
        raise SystemExit(f"{len(per_patient)} patients give only {sum(per_patient):,} lab rows")
    patients, total = reached[0]
    sized = run(patients, seed)
    labs = sized["counts"]["hosp/labevents"]
    assert labs == total >= target, (labs, total)
    print(
        f"{patients:,} patients (seed {seed}) give {labs:,} lab rows (the fewest that reach {target:,}); "
        f"{sum(sized['counts'].values()):,} rows in {sized['seconds']:.1f} s, "
        f"peak RSS {sized['peak_rss_mib']:.0f} MiB"
    )


if __name__ == "__main__":
    main()
