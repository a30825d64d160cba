"""The summary's rows and number formats, shared by the terminal table and the HTML page so both show the
same."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from contracts.score import THRESHOLDS, Metrics, RunReport

Kind = Literal["score", "count"]


@dataclass(frozen=True)
class Row:
    label: str
    kind: Kind
    values: list[float | None]  # one per run, in the order given
    intervals: list[list[float] | None] = field(default_factory=list)  # each run's 95 % [lo, hi], if any


@dataclass(frozen=True)
class Figure:
    """One figure of `Metrics` by its field and key ("pass_at_session", "0.75"), and its interval in `ci95`
    under the same names."""

    label: str
    name: str
    key: str | None = None

    def value(self, m: Metrics) -> float | None:
        found = getattr(m, self.name)
        return found if self.key is None else found.get(self.key)

    def interval(self, m: Metrics) -> list[float] | None:
        if m.ci95 is None:
            return None
        found = getattr(m.ci95, self.name)
        return found if self.key is None else found.get(self.key)


def fmt(value: float | None, kind: Kind = "score") -> str:
    if value is None:
        return "–"
    return f"{int(value):,}" if kind == "count" else f"{value:.3f}"


def fmt_ci(bounds: list[float] | None, digits: int = 3) -> str:
    """"[lo, hi]", or "" when the figure has no interval (one scenario, or a document without them)."""
    return "" if not bounds else f"[{bounds[0]:.{digits}f}, {bounds[1]:.{digits}f}]"


def fmt_with_ci(value: float | None, bounds: list[float] | None, digits: int = 3) -> str:
    shown = "–" if value is None else f"{value:.{digits}f}"
    return f"{shown} {fmt_ci(bounds, digits)}" if bounds and value is not None else shown


def fmt_delta(before: float | None, after: float | None, kind: Kind = "score") -> str:
    if before is None or after is None:
        return "–"
    delta = after - before
    if kind == "count":
        return f"{int(delta):+,}"
    return "±0.000" if abs(delta) < 5e-4 else f"{delta:+.3f}"


def figures(ks: Sequence[str]) -> list[Figure]:
    """Avg, Pass@Turn and Pass@Session at both τ, pass^k for each k."""
    return [Figure("Avg", "avg"),
            *[Figure(f"Pass@Turn τ={tau}", "pass_at_turn", tau) for tau in THRESHOLDS],
            *[Figure(f"Pass@Session τ={tau}", "pass_at_session", tau) for tau in THRESHOLDS],
            *[Figure(f"pass^{k}", "pass_hat_k", k) for k in ks]]


def pass_k_keys(reports: Sequence[RunReport]) -> list[str]:
    keys = {k for r in reports for k in r.metrics.pass_hat_k}
    return sorted(keys, key=lambda k: (not k.isdigit(), int(k) if k.isdigit() else 0, k))


def metric_rows(reports: Sequence[RunReport]) -> list[Row]:
    """Avg, Pass@Turn and Pass@Session at both τ, pass^k for every k any run has, the counts, then any other
    number the scorer added to its metrics (e.g. safety_failures): new figures show without a change here."""
    rows = [
        Row(f.label, "score", [f.value(r.metrics) for r in reports], [f.interval(r.metrics) for r in reports])
        for f in figures(pass_k_keys(reports))
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
DIMENSION_COLUMNS: list[Figure] = [
    Figure("Avg", "avg"),
    *[Figure(f"P@Turn {t}", "pass_at_turn", t) for t in THRESHOLDS],
    *[Figure(f"P@Session {t}", "pass_at_session", t) for t in THRESHOLDS],
]


def dimension_table(reports: Sequence[RunReport], dimension: str) -> list[tuple[str, list[Metrics | None]]]:
    """(value, that value's metrics in each run or None) for every value of the dimension any run has."""
    values = sorted({v for r in reports for v in r.by.get(dimension, {})})
    return [(v, [r.by.get(dimension, {}).get(v) for r in reports]) for v in values]
