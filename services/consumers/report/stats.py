"""Figures the views derive from a RunReport that the scorer does not store as such.

The scorer publishes Pass@Session at the issue's two thresholds; the report plots it over every τ in [0, 1],
so the curve is recomputed here from the per-turn scores in `sessions` (a session passes at τ when every one
of its turns scores ≥ τ). Sessions ended by infrastructure or patient errors are not the assistant's and never
enter a score; they are only counted.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from contracts.end_reasons import NOT_ASSISTANT_FAULT
from contracts.score import Metrics, RunReport, SessionScore

EPSILON = 1e-9  # a score of exactly τ passes even after float rounding (2/3 vs 0.6666…)
TAU_STEPS = 101  # τ = 0.00, 0.01, …, 1.00


def is_excluded(session: SessionScore) -> bool:
    """Infrastructure and patient errors are counted apart and never scored (not even 0)."""
    return session.reason in NOT_ASSISTANT_FAULT


def is_superseded(session: SessionScore) -> bool:
    """A later session of the run reran this one (`retryOf`): listed, never counted."""
    return session.superseded_by is not None


def counted_sessions(report: RunReport) -> list[SessionScore]:
    """The sessions the metrics count from: every one no rerun superseded."""
    return [s for s in report.sessions if not is_superseded(s)]


def scored_sessions(report: RunReport) -> list[SessionScore]:
    return [s for s in counted_sessions(report) if not is_excluded(s)]


def reason_counts(report: RunReport) -> tuple[dict[str, int], dict[str, int]]:
    """(the assistant's termination reasons, the excluded ones), each reason → sessions, most frequent first.

    The document's `reasons` is used when the scorer filled it; otherwise the sessions are counted.
    """
    counted = counted_sessions(report)
    counts = Counter(report.reasons) if report.reasons else Counter(s.reason for s in counted)
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    scored = {r: n for r, n in ordered if r not in NOT_ASSISTANT_FAULT}
    excluded = {r: n for r, n in ordered if r in NOT_ASSISTANT_FAULT}
    return scored, excluded


def session_passes(session: SessionScore, tau: float) -> bool:
    """Every turn ≥ τ. A session with no scored turn never answered anything and does not pass."""
    return bool(session.turns) and all(t.score >= tau - EPSILON for t in session.turns)


def pass_at_session_curve(report: RunReport, steps: int = TAU_STEPS) -> list[tuple[float, float]]:
    """(τ, share of scored sessions passing at τ) for τ evenly spaced over [0, 1]; empty without sessions.

    A session passes at τ while its lowest turn score is ≥ τ, so the sorted lowest scores answer every τ by
    bisection (10,000 sessions: milliseconds, not a pass over every turn per τ).
    """
    sessions = scored_sessions(report)
    if not sessions or steps < 2:
        return []
    # a session without turns never passes: it stands below every τ
    lowest = sorted(min(t.score for t in s.turns) if s.turns else -math.inf for s in sessions)
    taus = [i / (steps - 1) for i in range(steps)]
    return [(tau, (len(lowest) - bisect_left(lowest, tau - EPSILON)) / len(lowest)) for tau in taus]


def pass_hat_k_series(metrics: Metrics) -> list[tuple[int, float]]:
    """pass^k as (k, value) in increasing k; keys that are not whole numbers are ignored."""
    points = [(int(k), v) for k, v in metrics.pass_hat_k.items() if k.strip().isdigit()]
    return sorted(points)


def ehr_latencies(report: RunReport) -> list[float]:
    """Latency of every recorded EHR call of the scored sessions, in ms."""
    return [
        e.latency_ms
        for s in scored_sessions(report)
        for t in s.turns
        for e in t.exchanges
        if e.kind == "ehr" and e.latency_ms is not None
    ]


@dataclass(frozen=True)
class Histogram:
    edges: list[float]  # len(counts) + 1 bin edges, the last bin closed on the right
    counts: list[int]


def histogram(
    values: Sequence[float], bins: int = 20, lo: float | None = None, hi: float | None = None
) -> Histogram:
    """Equal-width bins over [lo, hi] (default: the values' range; one bin of width 1 when it is a point).

    Runs drawn together pass a shared range so their bins line up; values outside it fall in the end bins.
    """
    if not values:
        return Histogram(edges=[], counts=[])
    lo = min(values) if lo is None else lo
    hi = max(values) if hi is None else hi
    if hi <= lo:
        return Histogram(edges=[lo, lo + 1.0], counts=[len(values)])
    bins = max(1, bins)
    width = (hi - lo) / bins
    counts = [0] * bins
    for v in values:
        counts[max(0, min(int((v - lo) / width), bins - 1))] += 1
    return Histogram(edges=[lo + i * width for i in range(bins + 1)], counts=counts)


def percentile(values: Iterable[float], q: float) -> float | None:
    """Nearest-rank percentile (q in [0, 100]); None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered) - EPSILON)))
    return ordered[rank - 1]


def dimension_values(report: RunReport, dimension: str) -> list[tuple[str, Metrics]]:
    """The breakdown of one dimension, values in a stable order (L1 < L2 < L3, en < zh, …)."""
    return sorted(report.by.get(dimension, {}).items())


def judge_agreement(report: RunReport) -> tuple[int, int] | None:
    """(verdicts where the LLM judge agreed with the deterministic check, verdicts both gave) over the scored
    sessions, from the turns' `judge_agreement` entries ({id, judge, check}); None when nothing was judged."""
    pairs = [
        (bool(e["judge"]), bool(e["check"]))
        for s in scored_sessions(report)
        for t in s.turns
        for e in t.judge_agreement
        if isinstance(e, dict) and {"judge", "check"} <= e.keys()
    ]
    if not pairs:
        return None
    return sum(j == c for j, c in pairs), len(pairs)
