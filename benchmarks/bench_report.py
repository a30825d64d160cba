"""Rendering cost of `rounds report`: the HTML page, the JSON document and the terminal table of a run of
PhysAssistBench's size (324 sessions x 4 turns) and of larger runs, with a compared run of the same sessions.

    python benchmarks/bench_report.py                      # 324 and 3,000 sessions
    python benchmarks/bench_report.py --sessions 10000

Each turn carries 4 checks with evidence and 6 exchanges (doctor, 3 EHR calls, assistant→patient, answer), the
shape the scorer writes. Prints seconds per view and the page's size, also with the session list capped as
`rounds report --html` does by default, and what the statistics add: every figure's 95 % interval clustered by
scenario for both runs, the paired test (20,000 sign flips) and the sample-size plan.
"""

from __future__ import annotations

import argparse
import io
import random
import time

from rich.console import Console

from contracts.score import Check, Exchange, Metrics, RunReport, SessionScore, TurnScore
from foundation.gcpause import gc_paused
from services.consumers.report.cli import HTML_SESSIONS
from services.consumers.report.compare import compare_runs
from services.consumers.report.html_page import render_html
from services.consumers.report.json_io import to_json
from services.consumers.report.terminal import print_summary
from services.consumers.statistics.intervals import with_intervals
from services.consumers.statistics.paired import compare_paired
from services.consumers.statistics.power import plan_report

FAMILIES = ["renal_dosing", "electrolytes", "lab_trend", "medication_safety", "infection", "cardiac"]


def make_run(run: str, sessions: int, quality: float, seed: int) -> RunReport:
    rng = random.Random(seed)
    out = []
    for n in range(sessions):
        turns = []
        for i in range(4):
            checks = [
                Check(
                    id=f"t{i}-c{j}",
                    kind="fact_cited",
                    passed=rng.random() < quality,
                    evidence=f"cited {rng.uniform(0.5, 3):.2f} mg/dL for creatinine",
                )
                for j in range(4)
            ]
            exchanges = [Exchange(kind="doctor", text="What is the creatinine and does it change the dose?")]
            exchanges += [
                Exchange(
                    kind="ehr",
                    method="GET",
                    url=f"Observation?patient=p{n}&code=2160-0&_count={k}",
                    status=200,
                    latency_ms=rng.uniform(3, 90),
                )
                for k in range(3)
            ]
            exchanges += [
                Exchange(kind="question", text="Do you take ibuprofen?"),
                Exchange(kind="assistant", text="Creatinine is 1.8 mg/dL, up from 1.1; reduce the dose."),
            ]
            turns.append(
                TurnScore(
                    index=i, score=sum(c.passed for c in checks) / 4, checks=checks, exchanges=exchanges
                )
            )
        out.append(
            SessionScore(
                session=f"{run}-{n}",
                scenario=f"sc-{n // 3}",
                family=FAMILIES[n % 6],
                difficulty=f"L{1 + n % 3}",
                language="en" if n % 2 else "zh",
                variant="implicit" if n % 4 < 2 else "explicit",
                trial=n % 3,
                reason="completed",
                score=sum(t.score for t in turns) / 4,
                turns=turns,
            )
        )
    by = {
        d: {v: Metrics(avg=0.7, sessions=1) for v in {getattr(s, d) for s in out}}
        for d in ("family", "difficulty", "language", "variant")
    }
    return RunReport(
        run=run,
        scorer_version="1",
        metrics=Metrics(avg=0.7, pass_hat_k={"1": 0.5, "2": 0.3}),
        by=by,
        reasons={"completed": sessions},
        sessions=out,
    )


def timed(fn):
    """Seconds of one call with the cycle collector paused, as `rounds report` runs."""
    with gc_paused():
        start = time.perf_counter()
        result = fn()
        return result, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, nargs="+", default=[324, 3000])
    args = parser.parse_args()
    for n in args.sessions:
        base, other = make_run("base", n, 0.7, 1), make_run("replay", n, 0.95, 2)
        # what `rounds report` adds: every figure's interval (both runs), the paired test, the plan
        (base, other), t_ci = timed(lambda b=base, o=other: (with_intervals(b), with_intervals(o)))
        paired, t_paired = timed(lambda b=base, o=other: compare_paired(b, o))
        _, t_plan = timed(lambda b=base, o=other: plan_report(b, 0.05, o))
        page, t_html = timed(lambda b=base: render_html(b))
        page2, t_html2 = timed(lambda b=base, o=other: render_html(b, o))
        capped, t_cap = timed(lambda b=base, o=other: render_html(b, o, HTML_SESSIONS))
        doc, t_json = timed(lambda b=base: to_json(b))
        _, t_cmp = timed(lambda b=base, o=other: compare_runs(b, o))
        console = Console(file=io.StringIO(), width=160)
        _, t_term = timed(lambda b=base, o=other, c=console, p=paired: print_summary(c, b, o, None, p))
        print(
            f"{n:>6} sessions ({4 * n:,} turns): html {t_html:.2f} s ({len(page.encode()) / 2**20:.1f} MiB), "
            f"html with --compare {t_html2:.2f} s ({len(page2.encode()) / 2**20:.1f} MiB), "
            f"the same listing {HTML_SESSIONS:,} sessions per run (the CLI's default) {t_cap:.2f} s "
            f"({len(capped.encode()) / 2**20:.1f} MiB), "
            f"json {t_json:.2f} s ({len(doc.encode()) / 2**20:.1f} MiB), compare {t_cmp:.3f} s, "
            f"terminal {t_term:.3f} s; intervals of both runs {t_ci:.2f} s, paired test {t_paired:.2f} s, "
            f"plan {t_plan:.2f} s; `rounds report --compare --html` in all (intervals, paired, compare, "
            f"capped page, terminal) {t_ci + t_paired + t_cmp + t_cap + t_term:.2f} s"
        )


if __name__ == "__main__":
    main()
