"""The 95 % intervals of a RunReport's figures, overall and for every breakdown, clustered by scenario.

Each figure is a ratio of sums over units of one scenario or another (clustered.py): Avg is turn scores over
turns, Pass@Turn(τ) turns ≥ τ over turns, Pass@Session(τ) passing sessions over sessions, pass^k (τ²-bench,
per task = scenario × language × variant) the tasks' C(c,k)/C(n,k) over tasks. The units are read from the
report's own sessions, so a document written before intervals existed gets them too (`with_intervals`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from contracts.end_reasons import NOT_ASSISTANT_FAULT
from contracts.score import THRESHOLDS, Intervals, Metrics, RunReport, SessionScore
from services.consumers.statistics.clustered import METHOD, Estimate, clustered

SUCCESS = 0.75  # pass^k's success: every turn ≥ 0.75 (the scorer's SUCCESS_THRESHOLD)


def scored(report: RunReport) -> list[SessionScore]:
    """The sessions the figures count: not superseded by a rerun, scored (not excluded)."""
    return [s for s in report.sessions if s.superseded_by is None and s.score is not None
            and s.reason not in NOT_ASSISTANT_FAULT]


def passes(session: SessionScore, tau: float) -> bool:
    return bool(session.turns) and all(t.score >= tau for t in session.turns)


def _codes(values: Sequence[object]) -> np.ndarray:
    """Each value's index among the distinct values, in first-seen order."""
    index: dict[object, int] = {}
    return np.array([index.setdefault(v, len(index)) for v in values], dtype=np.int64)


@dataclass(frozen=True)
class Turns:
    """Every turn of the scored sessions as flat arrays (its session's position, score, task type), read once:
    each grouping of the report is then a mask and a few bincounts, not another walk over the sessions."""

    session: np.ndarray
    score: np.ndarray
    task_type: np.ndarray  # object array: the turn's task type or None

    @classmethod
    def of(cls, sessions: Sequence[SessionScore]) -> Turns:
        turns = [(i, t.score, t.task_type) for i, s in enumerate(sessions) for t in s.turns]
        return cls(np.array([t[0] for t in turns], dtype=np.int64),
                   np.array([t[1] for t in turns], dtype=float),
                   np.array([t[2] for t in turns], dtype=object))


@dataclass(frozen=True)
class Units:
    """Per scored session: its scenario's and its task's (scenario × language × variant) index, its turn-score
    sum and turn count, turns ≥ τ and whether it passes at τ: the arrays every grouping slices."""

    cluster: np.ndarray
    task: np.ndarray
    turn_sum: np.ndarray
    turns: np.ndarray
    at_least: dict[str, np.ndarray]
    passed: dict[str, np.ndarray]

    @classmethod
    def of(cls, sessions: Sequence[SessionScore], turns: Turns | None = None,
           task_type: str | None = None) -> Units:
        """`task_type`: that type's turns only (a task type's breakdown)."""
        turns = turns or Turns.of(sessions)
        n = len(sessions)
        keep = np.ones(turns.score.size, dtype=bool) if task_type is None else turns.task_type == task_type
        where, score = turns.session[keep], turns.score[keep]
        lowest = np.full(n, np.inf)
        np.minimum.at(lowest, turns.session, turns.score)  # a session passes at τ when its lowest turn does
        has_turns = np.bincount(turns.session, minlength=n) > 0
        return cls(
            cluster=_codes([s.scenario for s in sessions]),
            task=_codes([(s.scenario, s.language, s.variant) for s in sessions]),
            turn_sum=np.bincount(where, weights=score, minlength=n),
            turns=np.bincount(where, minlength=n).astype(float),
            at_least={tau: np.bincount(where, weights=score >= float(tau), minlength=n)
                      for tau in THRESHOLDS},
            passed={tau: (has_turns & (lowest >= float(tau))).astype(float) for tau in THRESHOLDS},
        )

    def subset(self, mask: np.ndarray) -> Units:
        return Units(self.cluster[mask], self.task[mask], self.turn_sum[mask], self.turns[mask],
                     {k: v[mask] for k, v in self.at_least.items()},
                     {k: v[mask] for k, v in self.passed.items()})


def pass_hat_k_units(units: Units, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(each task's C(c,k)/C(n,k), its scenario's index) over the tasks with at least k trials."""
    size = int(units.task.max()) + 1 if units.task.size else 0
    n = np.bincount(units.task, minlength=size)
    c = np.bincount(units.task, weights=units.passed[str(SUCCESS)], minlength=size)
    cluster = np.zeros(size, dtype=np.int64)
    cluster[units.task] = units.cluster
    chosen = n >= k
    value = np.ones(int(chosen.sum()))
    for i in range(k):  # C(c,k)/C(n,k) = Π (c−i)/(n−i)
        value *= np.clip(c[chosen] - i, 0, None) / (n[chosen] - i)
    return value, cluster[chosen]


def _bounds(found: Estimate | None) -> list[float] | None:
    if found is None or math.isnan(found.lo):
        return None
    return [round(found.lo, 6), round(found.hi, 6)]


def _put(target: dict[str, list[float]], key: str, found: Estimate | None) -> None:
    bounds = _bounds(found)
    if bounds is not None:
        target[key] = bounds


def estimates(units: Units, per_session: bool = True) -> tuple[Intervals, int]:
    """The intervals of one grouping's figures and its number of scenarios; `per_session=False` for a task
    type's grouping (its turns only: no session figures)."""
    out = Intervals()
    if units.cluster.size == 0:
        return out, 0
    out.avg = _bounds(clustered(units.turn_sum, units.turns, units.cluster))
    for tau in THRESHOLDS:
        _put(out.pass_at_turn, tau, clustered(units.at_least[tau], units.turns, units.cluster))
    if per_session:
        ones = np.ones(units.cluster.size)
        for tau in THRESHOLDS:
            _put(out.pass_at_session, tau, clustered(units.passed[tau], ones, units.cluster))
        k = 1
        while True:
            values, clusters = pass_hat_k_units(units, k)
            if values.size == 0:
                break
            _put(out.pass_hat_k, str(k), clustered(values, np.ones(values.size), clusters))
            k += 1
    counted = units.cluster if per_session else units.cluster[units.turns > 0]  # a type's: its turns'
    return out, len(np.unique(counted))


def _fill(metrics: Metrics, units: Units, per_session: bool = True) -> Metrics:
    intervals, n_clusters = estimates(units, per_session)
    return metrics.model_copy(update={"ci95": intervals, "n_clusters": n_clusters, "method": METHOD})


def _value(session: SessionScore, dimension: str) -> str | None:
    value = getattr(session, dimension, None)
    return None if value is None else str(value)


def with_intervals(report: RunReport) -> RunReport:
    """The report with `ci95`, `n_clusters` and `method` on its metrics and on every breakdown's."""
    sessions = scored(report)
    turns = Turns.of(sessions)
    units = Units.of(sessions, turns)
    by: dict[str, dict[str, Metrics]] = {}
    for dimension, values in report.by.items():
        by[dimension] = {}
        labels = np.array([_value(s, dimension) for s in sessions], dtype=object)
        for value, metrics in values.items():
            if dimension == "task_type":
                by[dimension][value] = _fill(metrics, Units.of(sessions, turns, value), per_session=False)
                continue
            by[dimension][value] = _fill(metrics, units.subset(labels == value))
    return report.model_copy(update={"metrics": _fill(report.metrics, units), "by": by})


def standard_errors(report: RunReport, tau: str = "0.75") -> dict[str, float]:
    """The clustered standard errors of Avg, Pass@Turn(τ) and Pass@Session(τ) (NaN with one scenario, absent
    without sessions): what Inspect AI shows beside the figures (rounds/inspect/scorer.py)."""
    units = Units.of(scored(report))
    found = {"avg": clustered(units.turn_sum, units.turns, units.cluster),
             "pass_at_turn": clustered(units.at_least[tau], units.turns, units.cluster),
             "pass_at_session": clustered(units.passed[tau], np.ones(units.cluster.size), units.cluster)}
    return {name: e.se for name, e in found.items() if e is not None}
