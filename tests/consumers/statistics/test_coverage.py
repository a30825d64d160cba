"""The intervals are right, measured on simulated runs with a known truth and known within-scenario
correlation: 1,000 seeded repetitions each (benchmarks/README.md has the figures these tests print)."""

from __future__ import annotations

import numpy as np
import pytest

from services.consumers.statistics.clustered import estimate
from tests.consumers.statistics.simulate import TURNS, Design, truth, turn_scores

REPS = 1000


def figures(scores: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(values, counts) per session for Avg, Pass@Turn(0.75) and Pass@Session(0.75), each of shape (reps,
    scenarios, sessions), from turn scores (reps, scenarios, sessions, TURNS)."""
    ones = np.ones(scores.shape[:-1])
    return {
        "avg": (scores.sum(-1), TURNS * ones),
        "pass_at_turn": ((scores >= 0.75).sum(-1).astype(float), TURNS * ones),
        "pass_at_session": ((scores >= 0.75).all(-1).astype(float), ones),
    }


def coverage(design: Design, seed: int) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """(clustered coverage, naive coverage, mean clustered/naive width ratio) per figure."""
    target = truth(design)
    scores = turn_scores(design, REPS, np.random.default_rng(seed))
    hits = {k: 0 for k in target}
    naive_hits = {k: 0 for k in target}
    ratio = {k: 0.0 for k in target}
    for name, (values, counts) in figures(scores).items():
        y, m = values.sum(-1), counts.sum(-1)  # per scenario, every repetition at once
        for r in range(REPS):
            c, n = estimate(y[r], m[r]), estimate(values[r].ravel(), counts[r].ravel())
            hits[name] += c.lo <= target[name] <= c.hi
            naive_hits[name] += n.lo <= target[name] <= n.hi
            ratio[name] += (c.hi - c.lo) / (n.hi - n.lo) / REPS
    return ({k: v / REPS for k, v in hits.items()}, {k: v / REPS for k, v in naive_hits.items()}, ratio)


@pytest.mark.parametrize("design", [Design(), Design(scenarios=12), Design(scenarios=60, mean_logit=2.5),
                                    Design(scenario_sd=0.0, session_sd=0.0)],
                         ids=["30 scenarios", "12 scenarios", "60 near the ceiling", "no correlation"])
def test_clustered_intervals_cover_the_truth_95_percent_of_the_time(design):
    covered, _, _ = coverage(design, seed=39)
    for name, share in covered.items():
        assert 0.93 <= share <= 0.97, (name, share)


def test_naive_intervals_undercover_and_clustered_are_wider_when_a_scenarios_sessions_correlate():
    covered, naive_covered, widths = coverage(Design(), seed=40)
    for name in covered:
        assert naive_covered[name] < 0.85, (name, naive_covered[name])  # the sessions are not independent
        assert widths[name] > 1.5, (name, widths[name])


def test_without_correlation_clustering_costs_little():
    """Scenarios that do not differ: the clustered interval is about as wide as the naive one."""
    _, _, widths = coverage(Design(scenario_sd=0.0, session_sd=0.0), seed=41)
    assert all(0.8 < w < 1.25 for w in widths.values()), widths
