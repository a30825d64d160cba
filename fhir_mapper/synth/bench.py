"""Benchmark of the generator: `python -m fhir_mapper.synth.bench [--patients 1000] [--labs 1000000]`.

Prints wall time, rows written and rows/s for N patients, peak RSS at 200 and 2,000 patients (it must stay
flat), and the smallest patient count (to ~1 %) whose labevents reach the lab target — the size of the
synthetic set the mapper benchmark needs. Each run is a fresh process, so peak RSS is its own.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
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


def run(patients: int, seed: int = 0) -> dict:
    with tempfile.TemporaryDirectory(prefix="rounds-synth-bench-") as out:
        done = subprocess.run(
            [sys.executable, "-c", RUN, out, str(patients), str(seed)],
            capture_output=True,
            text=True,
            check=True,
        )
        result = json.loads(done.stdout)
        result["bytes"] = sum(p.stat().st_size for p in Path(out).rglob("*.gz"))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patients", type=int, default=1000)
    parser.add_argument("--labs", type=int, default=1_000_000, help="lab rows the sizing search must reach")
    args = parser.parse_args()

    main_run = run(args.patients)
    rows = sum(main_run["counts"].values())
    print(
        f"{args.patients} patients: {main_run['seconds']:.1f} s wall ({main_run['cpu_seconds']:.1f} s CPU), "
        f"{rows:,} rows ({rows / main_run['seconds']:,.0f} rows/s wall, "
        f"{rows / main_run['cpu_seconds']:,.0f} rows/s CPU), {main_run['bytes'] / 2**20:.1f} MiB gzip, "
        f"peak RSS {main_run['peak_rss_mib']:.0f} MiB"
    )
    for table in ("hosp/labevents", "icu/chartevents", "hosp/emar", "hosp/admissions", "note/discharge"):
        print(f"  {table:20s} {main_run['counts'][table]:>10,}")

    small, large = run(200), run(2000)
    print(
        f"peak RSS: 200 patients {small['peak_rss_mib']:.0f} MiB, "
        f"2,000 patients {large['peak_rss_mib']:.0f} MiB "
        f"(growth {large['peak_rss_mib'] - small['peak_rss_mib']:.1f} MiB)"
    )

    per_patient = large["counts"]["hosp/labevents"] / 2000
    patients = math.ceil(args.labs / per_patient)
    while True:
        sized = run(patients)
        labs = sized["counts"]["hosp/labevents"]
        if labs >= args.labs:
            break
        patients = math.ceil(patients * 1.01)
    print(
        f"{patients:,} patients (seed 0) give {labs:,} lab rows (>= {args.labs:,}); "
        f"{sum(sized['counts'].values()):,} rows in {sized['seconds']:.1f} s, "
        f"peak RSS {sized['peak_rss_mib']:.0f} MiB"
    )


if __name__ == "__main__":
    main()
