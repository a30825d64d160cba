"""The HTML report's plots: mean turn score by each breakdown dimension, Pass@Session against τ, pass^k
against k, and the distribution of EHR call latencies — one series per run when two runs are compared.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from contracts.score import DIMENSIONS, THRESHOLDS, RunReport
from services.consumers.report.comparison_model import Comparison
from services.consumers.report.stats import ehr_latencies, histogram, pass_at_session_curve, pass_hat_k_series
from services.consumers.report.svg import Curve, Series, bar_chart, histogram_chart, line_chart

PLOTTED_FIRST = (
    "family",
    "difficulty",
    "language",
    "variant",
)  # always drawn, then any other dimension present
LATENCY_BINS = 20


def dimensions_to_plot(reports: Sequence[RunReport]) -> list[str]:
    present = {d for r in reports for d in r.by}
    others = [d for d in DIMENSIONS if d in present and d not in PLOTTED_FIRST]
    extra = sorted(present - set(PLOTTED_FIRST) - set(others))
    return [*PLOTTED_FIRST, *others, *extra]


def dimension_chart(reports: Sequence[RunReport], dimension: str) -> str:
    """Avg of each value of the dimension, with its 95 % interval as an error bar."""
    categories = sorted({v for r in reports for v in r.by.get(dimension, {})})
    series = []
    for r in reports:
        found = [r.by.get(dimension, {}).get(c) for c in categories]
        series.append(Series(r.run, [m.avg if m else None for m in found],
                             intervals=[m.ci95.avg if m and m.ci95 else None for m in found]))
    return bar_chart(f"mean turn score by {dimension}", categories, series, y_label="Avg")


def pass_at_session_chart(reports: Sequence[RunReport]) -> str:
    curves = [Curve(r.run, pass_at_session_curve(r)) for r in reports]
    return line_chart(
        "Pass@Session against τ (every turn ≥ τ)",
        curves,
        (0.0, 1.0),
        x_label="τ",
        y_label="share of sessions",
        markers=[float(t) for t in THRESHOLDS],
    )


def pass_hat_k_chart(reports: Sequence[RunReport]) -> str:
    curves = [Curve(r.run, [(float(k), v) for k, v in pass_hat_k_series(r.metrics)],
                    [r.metrics.ci95.pass_hat_k.get(str(k)) if r.metrics.ci95 else None
                     for k, _ in pass_hat_k_series(r.metrics)])
              for r in reports]
    ks = [x for c in curves for x, _ in c.points]
    x_range = (min(ks, default=1.0), max(max(ks, default=1.0), min(ks, default=1.0) + 1))
    return line_chart(
        "pass^k against k (same scenario, k trials all pass)",
        curves,
        x_range,
        x_label="k",
        y_label="pass^k",
        integer_x=True,
    )


def latency_chart(reports: Sequence[RunReport]) -> str:
    per_run = [(r.run, ehr_latencies(r)) for r in reports]
    values = [v for _, vs in per_run for v in vs]
    lo, hi = (min(values), max(values)) if values else (None, None)
    bins = LATENCY_BINS
    if lo is not None and hi is not None and hi <= lo:  # one distinct value: a single bin of width 1 ms
        hi, bins = lo + 1.0, 1
    hists = [(run, histogram(vs, bins, lo, hi)) for run, vs in per_run]
    return histogram_chart(f"EHR call latency ({len(values)} calls)", hists, x_label="latency (ms)")


def charts_section(reports: Sequence[RunReport]) -> str:
    charts = [dimension_chart(reports, d) for d in dimensions_to_plot(reports)]
    charts += [pass_at_session_chart(reports), pass_hat_k_chart(reports), latency_chart(reports)]
    return '<section id="plots"><h2>Plots</h2><div class="charts">' + "".join(charts) + "</div></section>"


def turn_changes_chart(comparison: Comparison) -> str:
    """How many turns improved and regressed at each turn index (turn 0 is the lookup, later turns build on
    it), so a change that only helps late turns shows at a glance."""
    indexes = sorted({t.index for p in comparison.pairs for t in p.turns})
    counts = {
        status: [sum(1 for p in comparison.pairs for t in p.turns if t.index == i and t.status == status)
                 for i in indexes]
        for status in ("improved", "regressed")
    }
    top = max((c for values in counts.values() for c in values), default=0)
    y_max = float(4 * max(1, math.ceil(top * 1.15 / 4)))  # whole-number ticks, room for the labels
    colors = {"improved": "#2e7d32", "regressed": "#c62828"}
    series = [Series(status, [float(c) for c in values], colors[status]) for status, values in counts.items()]
    return bar_chart(f"turns that changed, {comparison.before_run} → {comparison.after_run}",
                     [f"turn {i}" for i in indexes], series, y_max=y_max, y_label="turns", number="{:.0f}")
