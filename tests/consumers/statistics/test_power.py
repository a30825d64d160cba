"""Planning: the variance components are recovered from a run, the scenarios planned for a difference give
about the power asked for, and more trials narrow the interval only as far as trial noise allows."""

from __future__ import annotations

import math

import numpy as np
import pytest

from contracts.score import SessionScore
from services.consumers.statistics.clustered import normal_quantile, t_quantile
from services.consumers.statistics.paired import difference
from services.consumers.statistics.power import components, plan, scenarios_needed, trials_effect
from tests.consumers.report.sample import baseline_run


def sessions(scores: np.ndarray) -> list[SessionScore]:
    """Sessions from (scenarios, tasks, trials) session scores; tasks alternate language and variant."""
    out = []
    for c, tasks in enumerate(scores):
        for t, trials in enumerate(tasks):
            for k, score in enumerate(trials):
                language, variant = ("en", "zh")[t % 2], ("implicit", "explicit")[t // 2]
                out.append(SessionScore(session=f"{c}-{t}-{k}", scenario=f"sc-{c}", language=language,
                                        variant=variant, trial=k, reason="completed", score=float(score)))
    return out


def nested(rng: np.random.Generator, scenarios: int, tasks: int, trials: int,
           sd: tuple[float, float, float]) -> np.ndarray:
    s, t, k = sd
    return (0.5 + rng.normal(0, s, (scenarios, 1, 1)) + rng.normal(0, t, (scenarios, tasks, 1))
            + rng.normal(0, k, (scenarios, tasks, trials)))


def test_components_recover_the_simulated_variances():
    rng = np.random.default_rng(1)
    found = components(sessions(nested(rng, 400, 4, 3, (0.2, 0.1, 0.15))))
    assert found.scenario == pytest.approx(0.04, rel=0.2)
    assert found.task == pytest.approx(0.01, rel=0.3)
    assert found.trial == pytest.approx(0.0225, rel=0.1)
    assert (found.scenarios, found.tasks_per_scenario, found.trials_per_task) == (400, 4.0, 3.0)


def test_scenarios_needed_follows_the_t_formula():
    n = scenarios_needed(0.04, 0.05)
    z = (normal_quantile(0.975) + normal_quantile(0.8)) ** 2 * 0.04 / 0.05**2
    assert math.ceil(z) <= n <= math.ceil(z) + 3  # t on n−1 df asks a little more than z
    assert (t_quantile(n - 1) + t_quantile(n - 1, 0.6)) ** 2 * 0.04 / n <= 0.05**2
    with pytest.raises(ValueError, match="must be positive"):
        scenarios_needed(0.04, 0.0)


def test_the_planned_scenarios_give_about_80_percent_power():
    """Plan from one pilot run of paired differences, then simulate fresh studies of that size."""
    rng = np.random.default_rng(2)
    sd, d = (0.08, 0.04, 0.06), 0.03
    pilot = nested(rng, 200, 4, 1, sd) - 0.5 + d
    planned = plan(sessions(pilot), d, paired=True, trials=(1,))
    n = planned.needed[0][1]
    assert planned.paired and n is not None and 20 < n < 200
    found = 0
    for _ in range(400):
        study = (nested(rng, n, 4, 1, sd) - 0.5 + d).reshape(n, 4)
        result = difference(study.ravel(), np.ones(4 * n), np.repeat(np.arange(n), 4), flips=1000)
        found += result.p_value < 0.05
    assert 0.7 <= found / 400 <= 0.9, found / 400


def test_more_trials_plan_fewer_scenarios_and_narrow_the_interval():
    rng = np.random.default_rng(3)
    planned = plan(sessions(nested(rng, 60, 4, 3, (0.05, 0.05, 0.2))), 0.05)
    counts = [n for _, n in planned.needed]
    assert counts == sorted(counts, reverse=True) and counts[0] > counts[-1]
    assert any("3 trials per task" in line for line in planned.lines())
    effect = trials_effect(baseline_run())
    assert effect is not None and effect.trials == 2
    assert effect.half_width_all < effect.half_width_one
    assert "narrower" in effect.line()


def test_one_trial_says_trial_noise_is_not_measured():
    rng = np.random.default_rng(4)
    planned = plan(sessions(nested(rng, 30, 4, 1, (0.1, 0.1, 0.1))), 0.05)
    assert planned.components.trial == 0.0
    assert any("run --trials 2" in line for line in planned.lines())


def test_no_spread_plans_nothing():
    same = sessions(np.full((10, 4, 1), 0.5))
    planned = plan(same, 0.05)
    assert all(n is None for _, n in planned.needed)
    assert "nothing to plan from" in planned.lines()[-1]
