"""The summary's rows and number formats, shared by the terminal table and the HTML page so both show the
same."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from contracts.score import THRESHOLDS, Metrics, RunReport

Kind = Literal["score", "count"]


@dataclass(frozen=True)
class Row:
    label: str
    kind: Kind
    values: list[float | None]  # one per run, in the order given


def fmt(value: float | None, kind: Kind = "score") -> str:
    if value is None:
        return "–"
    return f"{int(value):,}" if kind == "count" else f"{value:.3f}"


def fmt_delta(before: float | None, after: float | None, kind: Kind = "score") -> str:
    if before is None or after is None:
        return "–"
    delta = after - before
    if kind == "count":
        return f"{int(delta):+,}"
    return "±0.000" if abs(delta) < 5e-4 else f"{delta:+.3f}"


def _pass_k(m: Metrics, k: str) -> float | None:
    return m.pass_hat_k.get(k)


def metric_getters(ks: Sequence[str]) -> list[tuple[str, Kind, Callable[[Metrics], float | None]]]:
    getters: list[tuple[str, Kind, Callable[[Metrics], float | None]]] = [("Avg", "score", lambda m: m.avg)]
    for tau in THRESHOLDS:
        getters.append((f"Pass@Turn τ={tau}", "score", lambda m, t=tau: m.pass_at_turn.get(t)))
    for tau in THRESHOLDS:
        getters.append((f"Pass@Session τ={tau}", "score", lambda m, t=tau: m.pass_at_session.get(t)))
    for k in ks:
        getters.append((f"pass^{k}", "score", lambda m, k=k: _pass_k(m, k)))
    return getters


def pass_k_keys(reports: Sequence[RunReport]) -> list[str]:
    keys = {k for r in reports for k in r.metrics.pass_hat_k}
    return sorted(keys, key=lambda k: (not k.isdigit(), int(k) if k.isdigit() else 0, k))


def metric_rows(reports: Sequence[RunReport]) -> list[Row]:
    """Avg, Pass@Turn and Pass@Session at both τ, pass^k for every k any run has, the counts, then any other
    number the scorer added to its metrics (e.g. safety_failures): new figures show without a change here."""
    rows = [
        Row(label, kind, [get(r.metrics) for r in reports])
        for label, kind, get in metric_getters(pass_k_keys(reports))
    ]
    rows.append(Row("turns scored", "count", [float(r.metrics.turns) for r in reports]))
    rows.append(Row("turns reached", "count", [float(r.metrics.turns_reached) for r in reports]))
    rows.append(Row("turns answered", "count", [float(r.metrics.turns_answered) for r in reports]))
    rows.append(Row("sessions scored", "count", [float(r.metrics.sessions) for r in reports]))
    rows.append(Row("sessions excluded", "count", [float(r.metrics.excluded_sessions) for r in reports]))
    for name in sorted({k for r in reports for k in (r.metrics.model_extra or {})}):
        values = [(r.metrics.model_extra or {}).get(name) for r in reports]
        numbers = [v for v in values if v is not None]
        if not numbers or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in numbers):
            continue  # only plain numbers are shown as rows
        kind: Kind = "count" if all(isinstance(v, int) for v in numbers) else "score"
        rows.append(Row(name.replace("_", " "), kind, [None if v is None else float(v) for v in values]))
    return rows


# the columns of a by-dimension table (pass^k is per scenario over trials; it is in the run's metrics only)
DIMENSION_COLUMNS: list[tuple[str, Callable[[Metrics], float | None]]] = [
    ("Avg", lambda m: m.avg),
    *[(f"P@Turn {t}", lambda m, t=t: m.pass_at_turn.get(t)) for t in THRESHOLDS],
    *[(f"P@Session {t}", lambda m, t=t: m.pass_at_session.get(t)) for t in THRESHOLDS],
]


def dimension_table(reports: Sequence[RunReport], dimension: str) -> list[tuple[str, list[Metrics | None]]]:
    """(value, that value's metrics in each run or None) for every value of the dimension any run has."""
    values = sorted({v for r in reports for v in r.by.get(dimension, {})})
    return [(v, [r.by.get(dimension, {}).get(v) for r in reports]) for v in values]
