"""The 95 % intervals of a RunReport's figures, overall and for every breakdown, clustered by scenario.

Each figure is a ratio of sums over units of one scenario or another (clustered.py): Avg is turn scores over
turns, Pass@Turn(τ) turns ≥ τ over turns, Pass@Session(τ) passing sessions over sessions, pass^k (τ²-bench,
per task = scenario × language × variant) the tasks' C(c,k)/C(n,k) over tasks. The units are read from the
report's own sessions, so a document written before intervals existed gets them too (`with_intervals`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from math import comb

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


@dataclass(frozen=True)
class Units:
    """Per scored session: its scenario's index, its turn-score sum and turn count, turns ≥ τ and whether
    it passes at τ (for each τ): the arrays every grouping of the report slices."""

    sessions: Sequence[SessionScore]
    cluster: np.ndarray
    turn_sum: np.ndarray
    turns: np.ndarray
    at_least: dict[str, np.ndarray]
    passed: dict[str, np.ndarray]

    @classmethod
    def of(cls, sessions: Sequence[SessionScore], task_type: str | None = None) -> Units:
        index: dict[str, int] = {}
        cluster = np.array([index.setdefault(s.scenario, len(index)) for s in sessions], dtype=np.int64)
        scores = [[t.score for t in s.turns if task_type is None or t.task_type == task_type]
                  for s in sessions]
        return cls(
            sessions=sessions,
            cluster=cluster,
            turn_sum=np.array([math.fsum(x) for x in scores], dtype=float),
            turns=np.array([len(x) for x in scores], dtype=float),
            at_least={tau: np.array([sum(v >= float(tau) for v in x) for x in scores], dtype=float)
                      for tau in THRESHOLDS},
            passed={tau: np.array([passes(s, float(tau)) for s in sessions], dtype=float)
                    for tau in THRESHOLDS},
        )

    def subset(self, mask: np.ndarray) -> Units:
        return Units([s for s, keep in zip(self.sessions, mask, strict=True) if keep], self.cluster[mask],
                     self.turn_sum[mask], self.turns[mask], {k: v[mask] for k, v in self.at_least.items()},
                     {k: v[mask] for k, v in self.passed.items()})


def pass_hat_k_units(sessions: Sequence[SessionScore], cluster: np.ndarray,
                     k: int) -> tuple[np.ndarray, np.ndarray]:
    """(each task's C(c,k)/C(n,k), its scenario's index) over the tasks with at least k trials."""
    tasks: dict[tuple, list[bool]] = defaultdict(list)
    where: dict[tuple, int] = {}
    for s, c in zip(sessions, cluster, strict=True):
        key = (s.scenario, s.language, s.variant)
        tasks[key].append(passes(s, SUCCESS))
        where[key] = int(c)
    chosen = [(comb(sum(v), k) / comb(len(v), k), where[key]) for key, v in tasks.items() if len(v) >= k]
    return (np.array([v for v, _ in chosen], dtype=float), np.array([c for _, c in chosen], dtype=np.int64))


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
            values, clusters = pass_hat_k_units(units.sessions, units.cluster, k)
            if values.size == 0:
                break
            _put(out.pass_hat_k, str(k), clustered(values, np.ones(values.size), clusters))
            k += 1
    return out, len(np.unique(units.cluster))


def _fill(metrics: Metrics, units: Units, per_session: bool = True) -> Metrics:
    intervals, n_clusters = estimates(units, per_session)
    return metrics.model_copy(update={"ci95": intervals, "n_clusters": n_clusters, "method": METHOD})


def _value(session: SessionScore, dimension: str) -> str | None:
    value = getattr(session, dimension, None)
    return None if value is None else str(value)


def with_intervals(report: RunReport) -> RunReport:
    """The report with `ci95`, `n_clusters` and `method` on its metrics and on every breakdown's."""
    sessions = scored(report)
    units = Units.of(sessions)
    by: dict[str, dict[str, Metrics]] = {}
    for dimension, values in report.by.items():
        by[dimension] = {}
        for value, metrics in values.items():
            if dimension == "task_type":
                by[dimension][value] = _fill(metrics, Units.of(sessions, task_type=value), per_session=False)
                continue
            mask = np.array([_value(s, dimension) == value for s in sessions], dtype=bool)
            by[dimension][value] = _fill(metrics, units.subset(mask))
    return report.model_copy(update={"metrics": _fill(report.metrics, units), "by": by})


def standard_errors(report: RunReport, tau: str = "0.75") -> dict[str, float]:
    """The clustered standard errors of Avg, Pass@Turn(τ) and Pass@Session(τ) (NaN with one scenario, absent
    without sessions): what Inspect AI shows beside the figures (rounds/inspect/scorer.py)."""
    units = Units.of(scored(report))
    found = {"avg": clustered(units.turn_sum, units.turns, units.cluster),
             "pass_at_turn": clustered(units.at_least[tau], units.turns, units.cluster),
             "pass_at_session": clustered(units.passed[tau], np.ones(units.cluster.size), units.cluster)}
    return {name: e.se for name, e in found.items() if e is not None}
