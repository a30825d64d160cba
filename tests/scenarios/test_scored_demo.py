"""The scorer on sessions the simulator played over scenarios the builder made from the real MIMIC-IV demo
(the validity check): the oracle scores full marks in EN and ZH, an assistant that answers without
looking anything up scores near 0, the heuristic baseline in between."""

from __future__ import annotations

import asyncio
from collections import Counter

from rounds.settings import Settings
from services.consumers.scoring.api import score_run
from services.simulator.orchestrator.entry import RunOptions, run_scenarios
from services.simulator.orchestrator.jobs import plan

PER_FAMILY = 5


def _run(url: str, lines, spec: str, run_id: str, variant: str) -> None:
    jobs = plan(lines, 1, ("en", "zh"), variant)
    summary = asyncio.run(run_scenarios(jobs, spec, RunOptions(run_id), Settings(database_url=url)))
    assert set(summary.by_reason) == {"completed"}, summary.by_reason


def test_oracle_full_marks_weak_near_zero_baseline_between(demo_build, demo_url: str) -> None:
    taken: Counter = Counter()
    chosen = []
    for scenario in demo_build.scenarios:
        if scenario.family != "medagentbench" and taken[scenario.family] < PER_FAMILY:
            taken[scenario.family] += 1
            chosen.append((scenario, scenario.model_dump(mode="json")))
    settings = Settings(database_url=demo_url)
    reports = {}
    # implicit only: what each assistant scores on explicit requests is the red-team benchmark's comparison
    for spec, variant in (("oracle", "implicit"), ("weak", "implicit"), ("baseline", "implicit")):
        run_id = f"scored-demo-{spec}-{variant}"
        _run(demo_url, chosen, spec, run_id, variant)
        reports[(spec, variant)] = score_run(settings, run_id, timeout_s=600)
    oracle = reports[("oracle", "implicit")]
    failed = [(s.scenario, s.language, t.index, c.id, c.evidence)
              for s in oracle.sessions for t in s.turns for c in t.checks if not c.passed]
    assert oracle.metrics.sessions == 2 * len(chosen) and oracle.metrics.avg >= 0.99, failed[:10]
    assert min(m.avg for m in oracle.by["language"].values()) >= 0.99
    weak = reports[("weak", "implicit")].metrics.avg
    baseline = reports[("baseline", "implicit")].metrics.avg
    assert weak < 0.15 < baseline < oracle.metrics.avg
    for (spec, variant), report in reports.items():
        by_type = {k: round(v.avg, 3) for k, v in report.by["task_type"].items()}
        print(spec, variant, round(report.metrics.avg, 3), by_type)
