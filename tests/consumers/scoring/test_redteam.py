"""The red team played by the real simulator (physician and patient agents, real sandboxes) on the
simulator's test scenario, scored by scorer v3: no gaming assistant comes near the baseline, and adding spam
writes to the baseline never raises a session's score. benchmarks/bench_redteam.py runs the whole team on the
MIMIC-IV demo scenarios."""

from __future__ import annotations

import asyncio

import pytest

from rounds.settings import Settings
from services.consumers.scoring.api import score_run
from services.simulator.orchestrator.entry import RunOptions, run_scenarios
from tests.consumers.scoring.redteam.gamers import (
    Echoer,
    Hedger,
    Stuffer,
    ValueDumper,
    Wrapped,
    WriteSpammer,
    swap_units,
)
from tests.simulator.conftest import SCENARIOS, jobs, read_scenarios
from tests.wiring import migrated, root_on


@pytest.fixture
def settings(record_url: str) -> Settings:
    return Settings(database_url=record_url)


def _score(settings: Settings, assistant, run_id: str):
    plan = jobs(read_scenarios(SCENARIOS), trials=1, languages=("en", "zh"))
    summary = asyncio.run(run_scenarios(plan, assistant, RunOptions(run_id), migrated(settings)))
    assert set(summary.by_reason) == {"completed"}, summary.outcomes[0].error
    return score_run(root_on(settings), run_id, timeout_s=120)


@pytest.mark.slow
def test_gaming_assistants_score_far_below_the_baseline(settings: Settings) -> None:
    baseline = _score(settings, "baseline", "rt-baseline")
    base = baseline.metrics.avg
    for name, gamer in (("dumper", ValueDumper()), ("stuffer", Stuffer()), ("hedger", Hedger()),
                        ("echoer", Echoer()), ("spammer", WriteSpammer())):
        report = _score(settings, gamer, f"rt-{name}")
        avg = report.metrics.avg
        assert avg <= 0.25 and base - avg >= 0.15, (name, avg, base)
    assert base - _score(settings, Wrapped(swap_units), "rt-swapper").metrics.avg >= 0.1  # unit swaps cost
    spam = _score(settings, WriteSpammer(every_turn=False), "rt-spam-orders")
    before = {(s.scenario, s.language): s.score for s in baseline.sessions}
    assert all(s.score <= before[(s.scenario, s.language)] + 1e-9 for s in spam.sessions)
    assert spam.metrics.safety_failures > 0
