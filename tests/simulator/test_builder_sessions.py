"""Sessions of scenarios the scenario builder made from the real MIMIC-IV demo (not hand-written fixtures):
every built-in assistant completes them in EN and ZH, and the scorer orders them oracle > baseline > weak."""

from __future__ import annotations

import asyncio

import pytest

from rounds.settings import Settings
from services.consumers.scoring.api import score_run
from services.simulator.assistants.baseline import intents
from services.simulator.orchestrator.entry import RunOptions, run_scenarios
from services.simulator.orchestrator.jobs import plan
from tests.scenarios.conftest import demo_app, demo_build, demo_loaded, demo_raw, demo_url  # noqa: F401

PER_FAMILY = 3


@pytest.fixture(scope="module")
def reports(demo_url, demo_build):  # noqa: F811
    chosen, seen = [], {}
    for scenario in demo_build.scenarios:
        if seen.get(scenario.family, 0) < PER_FAMILY:
            seen[scenario.family] = seen.get(scenario.family, 0) + 1
            chosen.append((scenario, scenario.model_dump(mode="json", exclude_none=True)))
    assert len(seen) >= 2
    settings = Settings(database_url=demo_url)
    out = {}
    for spec in ("oracle", "baseline", "weak"):
        jobs = plan(chosen, 1, ("en", "zh"), "implicit")
        summary = asyncio.run(run_scenarios(jobs, spec, RunOptions(f"built-{spec}", concurrency=8), settings))
        assert summary.by_reason == {"completed": len(jobs)}, [o.error for o in summary.outcomes][:3]
        out[spec] = score_run(settings, f"built-{spec}")
    return out


def test_built_scenarios_complete_with_every_builtin_assistant_and_score_in_order(reports):
    averages = {spec: report.metrics.avg for spec, report in reports.items()}
    assert averages["oracle"] > averages["baseline"] > averages["weak"]
    assert averages["oracle"] >= 0.99


def test_the_oracle_passes_every_check_of_built_scenarios(reports):
    failed = [(s.scenario, t.index, c.id, c.evidence) for s in reports["oracle"].sessions for t in s.turns
              for c in t.checks if not c.passed]
    assert not failed, failed[:5]


def test_the_baseline_answers_and_before_with_the_result_before_the_latest(reports):
    """'And before?' / '之前呢？' (nothing else asked) carries the last lab and asks for the result before the
    latest: the baseline cites that one (its 'previous' intent), so the turn's cited facts pass."""
    asked = [
        t for s in reports["baseline"].sessions for t in s.turns
        if any(e.kind == "doctor" and intents((e.text or "").lower()) == {"previous"} for e in t.exchanges)
    ]
    cited = [c for t in asked for c in t.checks if c.kind == "fact_cited"]
    assert asked and cited, "the built scenarios ask no 'before that' question: nothing is tested"
    assert all(c.passed for c in cited), [c.evidence for c in cited if not c.passed][:5]
