"""Scoring logs the simulator wrote (services/simulator: physician and patient agents, real sandboxes) — the
same path as `rounds run` on the embedded default, which scores in process with `score_run`."""

from __future__ import annotations

import asyncio

import pytest

from rounds.settings import Settings
from services.consumers.scoring.api import score_run
from services.simulator.orchestrator.entry import RunOptions, run_scenarios
from tests.simulator.conftest import SCENARIOS, jobs, read_scenarios
from tests.wiring import migrated, root_on


@pytest.fixture
def settings(record_url: str) -> Settings:
    return Settings(database_url=record_url)


def _run(settings: Settings, spec: str, run_id: str, languages=("en", "zh"), trials: int = 1):
    plan = jobs(read_scenarios(SCENARIOS), trials=trials, languages=languages)
    return asyncio.run(run_scenarios(plan, spec, RunOptions(run_id), migrated(settings)))


def test_oracle_scores_full_marks_weak_scores_low_and_rescoring_is_identical(settings: Settings) -> None:
    reports = {}
    for spec in ("oracle", "baseline", "weak"):
        summary = _run(settings, spec, f"run-{spec}")
        assert set(summary.by_reason) == {"completed"}, summary.outcomes[0].error
        reports[spec] = score_run(root_on(settings), f"run-{spec}", timeout_s=120)
    oracle = reports["oracle"]
    failed = [(s.language, t.index, c.id, c.evidence)
              for s in oracle.sessions for t in s.turns for c in t.checks if not c.passed]
    assert oracle.metrics.avg >= 0.99, failed
    assert oracle.metrics.sessions == 2 and set(oracle.by["language"]) == {"en", "zh"}
    assert reports["weak"].metrics.avg < 0.5 < oracle.metrics.avg
    # baseline answers from the record but does not write: full marks except on the write turn
    assert reports["baseline"].by["task_type"]["lookup"].avg == 1.0
    assert reports["baseline"].by["task_type"]["write"].avg < 1.0
    again = score_run(root_on(settings), "run-oracle", timeout_s=120)
    assert again.model_dump() == oracle.model_dump()
