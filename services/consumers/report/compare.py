"""Pairs two scored runs session by session and turn by turn, so the report can show which turns improved.

Sessions are matched on (scenario, trial, language, variant): a counterfactual replay keeps all four, so a
replay and its original pair one to one; sessions present in one run only are kept and shown as such.
"""

from __future__ import annotations

from collections import Counter

from contracts.score import RunReport, SessionScore, TurnScore
from services.consumers.report.comparison_model import (
    CheckChange,
    Comparison,
    SessionKey,
    SessionPair,
    TurnDelta,
    TurnStatus,
)
from services.consumers.report.stats import EPSILON, counted_sessions, is_excluded

STATUS_ORDER: tuple[TurnStatus, ...] = (
    "improved",
    "regressed",
    "unchanged",
    "only_before",
    "only_after",
    "excluded",
)


def session_key(session: SessionScore) -> SessionKey:
    return (session.scenario, session.trial, session.language or "", session.variant or "")


def _index(report: RunReport) -> dict[SessionKey, SessionScore]:
    sessions: dict[SessionKey, SessionScore] = {}
    for s in counted_sessions(report):  # a superseded session shares its rerun's key
        sessions.setdefault(session_key(s), s)  # a duplicate key (should not happen) keeps the first
    return sessions


def _changed_checks(before: TurnScore | None, after: TurnScore | None) -> list[CheckChange]:
    b = {c.id: c for c in before.checks} if before else {}
    a = {c.id: c for c in after.checks} if after else {}
    changes = []
    for cid in list(b) + [c for c in a if c not in b]:
        vb = b[cid].passed if cid in b else None
        va = a[cid].passed if cid in a else None
        if vb != va:
            changes.append(CheckChange(id=cid, kind=(b.get(cid) or a[cid]).kind, before=vb, after=va))
    return changes


def _status(before: TurnScore | None, after: TurnScore | None, excluded: bool) -> TurnStatus:
    if excluded:
        return "excluded"
    if after is None:
        return "only_before"
    if before is None:
        return "only_after"
    if after.score > before.score + EPSILON:
        return "improved"
    if after.score < before.score - EPSILON:
        return "regressed"
    return "unchanged"


def _turn_deltas(before: SessionScore | None, after: SessionScore | None) -> list[TurnDelta]:
    excluded = any(s is not None and is_excluded(s) for s in (before, after))
    b = {t.index: t for t in before.turns} if before else {}
    a = {t.index: t for t in after.turns} if after else {}
    deltas = []
    for index in sorted(set(b) | set(a)):
        tb, ta = b.get(index), a.get(index)
        delta = ta.score - tb.score if tb is not None and ta is not None else None
        deltas.append(
            TurnDelta(
                index=index,
                before=tb.score if tb else None,
                after=ta.score if ta else None,
                delta=delta,
                status=_status(tb, ta, excluded),
                changed_checks=_changed_checks(tb, ta),
            )
        )
    return deltas


def compare_runs(before: RunReport, after: RunReport) -> Comparison:
    """Every session of either run, paired by key, in the before run's order then the after run's extras."""
    b, a = _index(before), _index(after)
    keys = list(b) + [k for k in a if k not in b]
    pairs = [
        SessionPair(key=k, before=b.get(k), after=a.get(k), turns=_turn_deltas(b.get(k), a.get(k)))
        for k in keys
    ]
    counts = Counter(t.status for p in pairs for t in p.turns)
    return Comparison(
        before_run=before.run,
        after_run=after.run,
        pairs=pairs,
        turn_counts={s: counts.get(s, 0) for s in STATUS_ORDER},
    )


def metric_delta(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else after - before
