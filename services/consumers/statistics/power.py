"""Where a run's spread comes from, what its trials bought, and how many scenarios and trials a difference
needs: the planning figures of `rounds report --power`.

Variance components of the session score (mean of its turns), by moments on the nesting scenario > task
(language × variant) > trial: σ²_trial (trials of one task), σ²_task (tasks of one scenario, beyond their
trials' noise) and σ²_scenario (beyond both). The mean over a scenario's v tasks × k trials then has variance
σ²_scenario + σ²_task/v + σ²_trial/(v·k), which says how far more trials help (only the last term shrinks)
and how many scenarios a difference d needs at 80 % power with a two-sided 5 % test. From one run the second
assistant is assumed to vary as much and independently (twice the variance: cautious, since scenarios
shared by both runs usually correlate, which a paired comparison of two runs measures instead).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from contracts.score import RunReport, SessionScore
from services.consumers.statistics.clustered import LEVEL, clustered, t_quantile
from services.consumers.statistics.intervals import scored

POWER = 0.8
TRIALS_PLANNED = (1, 2, 3, 5, 10)


class Observation(NamedTuple):
    """One session's score where it was observed: a run's session, or a paired difference B − A."""

    scenario: str
    language: str | None
    variant: str | None
    score: float | None


Observed = SessionScore | Observation


@dataclass(frozen=True)
class Components:
    scenario: float  # σ² between scenarios
    task: float  # σ² between a scenario's tasks (language × variant), beyond trial noise
    trial: float  # σ² between trials of one task (0 with one trial each)
    scenarios: int
    tasks_per_scenario: float  # v
    trials_per_task: float  # k

    def scenario_mean_variance(self, trials: float | None = None) -> float:
        k = self.trials_per_task if trials is None else trials
        v = max(self.tasks_per_scenario, 1.0)
        return self.scenario + self.task / v + self.trial / (v * k)


def _pooled(values: np.ndarray, groups: np.ndarray) -> tuple[float, float, np.ndarray]:
    """(pooled within-group variance, mean group size, each group's mean) for group codes 0..G−1; the
    variance is 0 when no group has two values."""
    size = np.bincount(groups)
    means = np.bincount(groups, weights=values) / size
    residual = values - means[groups]
    df = values.size - size.size
    return (float(residual @ residual) / df if df > 0 else 0.0), float(size.mean()), means


def components(sessions: Sequence[Observed]) -> Components:
    """Method-of-moments components of the session score, balanced-design approximation (mean sizes)."""
    found = [s for s in sessions if s.score is not None]
    if not found:
        return Components(0.0, 0.0, 0.0, 0, 1.0, 1.0)
    values = np.array([s.score for s in found], dtype=float)
    task_index: dict[tuple, int] = {}
    tasks = np.array([task_index.setdefault((s.scenario, s.language, s.variant), len(task_index))
                      for s in found], dtype=np.int64)
    trial, k, task_means = _pooled(values, tasks)
    scenario_index: dict[str, int] = {}
    of_task = np.array([scenario_index.setdefault(key[0], len(scenario_index)) for key in task_index],
                       dtype=np.int64)
    task_means_var, v, scenario_means = _pooled(task_means, of_task)
    task = max(0.0, task_means_var - trial / k)
    between = float(np.var(scenario_means, ddof=1)) if scenario_means.size > 1 else 0.0
    scenario = max(0.0, between - task / v - trial / (v * k))
    return Components(scenario, task, trial, scenario_means.size, v, k)


def scenarios_needed(variance: float, d: float, power: float = POWER, level: float = LEVEL) -> int | None:
    """Scenarios n with (t_{1−α/2} + t_{power}) · √(variance / n) ≤ d, t on n−1 df (iterated from z)."""
    if d <= 0:
        raise ValueError(f"the difference to detect must be positive, not {d}")
    if variance <= 0:
        return None  # nothing varies: no sample size follows from it
    n = 2
    for _ in range(50):
        df = max(1, n - 1)
        need = (t_quantile(df, level) + t_quantile(df, 2 * power - 1)) ** 2 * variance / d**2
        new = max(2, math.ceil(need))
        if new == n:
            break
        n = new
    return n


@dataclass(frozen=True)
class Plan:
    d: float
    components: Components
    paired: bool  # the variance is of paired differences (two runs), not of one run doubled
    needed: list[tuple[int, int | None]]  # (trials per task, scenarios needed)

    def lines(self) -> list[str]:
        c = self.components
        basis = "the paired differences of the two runs" if self.paired else \
            "this run, assuming a second assistant varies as much, independently"
        out = [f"to detect a difference of {self.d:.3f} in mean session score at 80 % power (two-sided 5 %), "
               f"from {basis} (σ² scenario {c.scenario:.4f}, task {c.task:.4f}, trial {c.trial:.4f}; "
               f"{c.tasks_per_scenario:.1f} tasks per scenario):"]
        if all(n is None for _, n in self.needed):
            return [*out, "  no spread at all in these sessions: nothing to plan from (deterministic "
                          "sessions, or identical runs); plan from a run whose sessions vary"]
        out += [f"  {k} trial{'s' if k > 1 else ''} per task: {n} scenarios" for k, n in self.needed]
        if c.trials_per_task <= 1:
            out.append("  (one trial per task: trial noise cannot be told apart from the tasks' spread, so "
                       "more trials show no gain here; run --trials 2 or more to measure it)")
        return out


def plan(values: Sequence[Observed], d: float, paired: bool = False,
         trials: Sequence[int] = TRIALS_PLANNED) -> Plan:
    """Scenarios needed for each number of trials to detect `d` (sessions: one run, or paired differences
    each an Observation whose score is B − A)."""
    comp = components(values)
    factor = 1.0 if paired else 2.0
    needed = [(k, scenarios_needed(factor * comp.scenario_mean_variance(k), d)) for k in trials]
    return Plan(d, comp, paired, needed)


@dataclass(frozen=True)
class TrialsEffect:
    trials: int
    within_task_variance: float  # σ² between trials of one task
    between_scenario_variance: float
    half_width_one: float | None  # the Avg interval's half-width from the first trial of each task alone
    half_width_all: float | None  # ... from every trial

    def line(self) -> str:
        text = (f"{self.trials} trials: within-task variance {self.within_task_variance:.4f}, "
                f"between-scenario {self.between_scenario_variance:.4f}")
        if self.half_width_one and self.half_width_all:
            cut = 1 - self.half_width_all / self.half_width_one
            text += (f"; Avg interval ±{self.half_width_one:.3f} from one trial, ±{self.half_width_all:.3f} "
                     f"from {self.trials} ({cut:.0%} narrower)")
        return text


def _half_width(sessions: Sequence[SessionScore]) -> float | None:
    index: dict[str, int] = {}
    cluster = np.array([index.setdefault(s.scenario, len(index)) for s in sessions], dtype=np.int64)
    sums = np.array([math.fsum(t.score for t in s.turns) for s in sessions], dtype=float)
    counts = np.array([len(s.turns) for s in sessions], dtype=float)
    found = clustered(sums, counts, cluster)
    return None if found is None or math.isnan(found.lo) else (found.hi - found.lo) / 2


def trials_effect(report: RunReport) -> TrialsEffect | None:
    """With more than one trial per task: the trial noise, and the Avg interval with one trial vs all."""
    sessions = scored(report)
    trials = len({s.trial for s in sessions})
    if trials < 2:
        return None
    comp = components(sessions)
    first: dict[tuple, SessionScore] = {}
    for s in sorted(sessions, key=lambda s: s.trial):
        first.setdefault((s.scenario, s.language, s.variant), s)
    return TrialsEffect(trials, comp.trial, comp.scenario, _half_width(list(first.values())),
                        _half_width(sessions))


def plan_report(report: RunReport, d: float, other: RunReport | None = None) -> Plan:
    """From one run, or (with `other`) from the paired differences other − report of matched sessions."""
    if other is None:
        return plan(scored(report), d)
    after = {(s.scenario, s.trial, s.language, s.variant): s for s in scored(other)}
    diffs = [Observation(s.scenario, s.language, s.variant, found.score - s.score)
             for s in scored(report)
             if (found := after.get((s.scenario, s.trial, s.language, s.variant))) is not None
             and found.score is not None and s.score is not None]
    return plan(diffs, d, paired=True)
