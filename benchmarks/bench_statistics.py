"""The statistics' simulated figures: how often the 95 % intervals cover the truth, how often the paired test
calls a difference where there is none, and how much wider clustering makes the intervals, over 1,000 seeded
repetitions of simulated runs (tests/consumers/statistics/simulate.py: scenarios differ on the logit scale by
`scenario_sd`, their sessions by `session_sd`; 4 turns of 4 checks each). The same functions the tests in
tests/consumers/statistics assert on; this prints their numbers for benchmarks/README.md.

    python benchmarks/bench_statistics.py
"""

from __future__ import annotations

import time

from tests.consumers.statistics.simulate import Design
from tests.consumers.statistics.test_coverage import coverage
from tests.consumers.statistics.test_paired import rejections_and_coverage

DESIGNS = {
    "30 scenarios × 8 sessions": Design(),
    "12 scenarios × 8 sessions": Design(scenarios=12),
    "60 scenarios, near the ceiling (Avg 0.89)": Design(scenarios=60, mean_logit=2.5),
    "20 scenarios, scenarios differ more (sd 2)": Design(scenarios=20, scenario_sd=2.0),
    "30 scenarios, no correlation": Design(scenario_sd=0.0, session_sd=0.0),
}

PAIRED = (("12 scenarios, Δ 0 (every sign pattern)", Design(scenarios=12), 0.0, 0),
          ("30 scenarios, Δ 0 (2,000 flips)", Design(), 0.0, 2000),
          ("30 scenarios, Δ +0.05 Avg (2,000 flips)", Design(), 0.3, 2000))


def main() -> None:
    start = time.perf_counter()
    print("95 % interval coverage over 1,000 repetitions (clustered | naive), clustered/naive width")
    for name, design in DESIGNS.items():
        covered, naive, widths = coverage(design, seed=39)
        cells = ", ".join(f"{k} {covered[k]:.1%} | {naive[k]:.1%} (×{widths[k]:.2f})" for k in covered)
        print(f"  {name}: {cells}")
    print("paired test over 1,000 repetitions: share called significant at 5 %, coverage of the true Δ")
    for name, design, shift, flips in PAIRED:
        rejected, covered = rejections_and_coverage(design, shift, seed=5, flips=flips)
        print(f"  {name}: significant {rejected:.1%}, interval covers Δ {covered:.1%}")
    print(f"({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
