"""Inspect's view of a run carries Rounds' clustered standard errors beside Avg, Pass@Turn and Pass@Session:
the same numbers `rounds report` computes, wider than the naive ones when a scenario's sessions agree."""

from __future__ import annotations

import math

import numpy as np
import pytest
from inspect_ai.scorer import SampleScore, Score

from rounds.inspect.scorer import avg, avg_stderr, pass_at_session_stderr, pass_at_turn_stderr
from services.consumers.statistics.clustered import naive
from services.consumers.statistics.intervals import scored, standard_errors
from tests.consumers.report.sample import baseline_run


def _scores() -> list[SampleScore]:
    report = baseline_run()
    return [SampleScore(score=Score(value=s.score or 0.0, metadata={"rounds": s.model_dump(mode="json")}),
                        sample_id=s.session) for s in report.sessions]


def test_the_metrics_carry_the_clustered_standard_errors():
    scores = _scores()
    expected = standard_errors(baseline_run())
    assert avg()(scores) == round(baseline_run().metrics.avg, 6)  # the scorer rounds to 6 digits
    # the same sessions in the scorer's order: equal up to the order of float sums
    assert avg_stderr()(scores) == pytest.approx(expected["avg"], rel=1e-12) and expected["avg"] > 0
    assert pass_at_turn_stderr()(scores) == pytest.approx(expected["pass_at_turn"], rel=1e-12)
    assert pass_at_session_stderr()(scores) == pytest.approx(expected["pass_at_session"], rel=1e-12)
    sessions = scored(baseline_run())
    turns = np.array([len(s.turns) for s in sessions], dtype=float)
    sums = np.array([sum(t.score for t in s.turns) for s in sessions])
    assert expected["avg"] != naive(sums, turns).se  # clustered by scenario, not per session


def test_one_scenario_has_no_standard_error():
    one = [s for s in _scores() if s.score.metadata["rounds"]["scenario"] == "glucose-trend-003"]
    assert math.isnan(avg_stderr()(one))
