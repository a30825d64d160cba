"""The terminal summary of `rounds report`: metrics, termination reasons and the difficulty/language
breakdowns of one run, or of two runs side by side with deltas (after − before) when `--compare` is given.

Every cell is a rich `Text`, never markup: names come from scenario files and could hold `[...]`.
"""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from contracts.score import Metrics, RunReport
from services.consumers.report.comparison_model import Comparison
from services.consumers.report.stats import counted_sessions, judge_agreement, reason_counts
from services.consumers.report.summary import DIMENSION_COLUMNS, dimension_table, fmt, fmt_delta, metric_rows

TERMINAL_DIMENSIONS = ("difficulty", "language")


def _run_columns(table: Table, reports: list[RunReport]) -> None:
    for r in reports:
        table.add_column(Text(r.run), justify="right")
    if len(reports) == 2:
        table.add_column("Δ", justify="right")


def metrics_table(reports: list[RunReport]) -> Table:
    table = Table(
        title="metrics",
        caption="infrastructure/patient errors excluded",
        title_justify="left",
        caption_justify="left",
    )
    table.add_column("metric")
    _run_columns(table, reports)
    for row in metric_rows(reports):
        cells = [Text(fmt(v, row.kind)) for v in row.values]
        if len(reports) == 2:
            cells.append(Text(fmt_delta(row.values[0], row.values[1], row.kind)))
        table.add_row(Text(row.label), *cells)
    return table


def reasons_table(reports: list[RunReport], excluded: bool) -> Table:
    """Sessions by termination reason: the assistant's, or (excluded=True) those kept out of scores."""
    title = (
        "sessions excluded from scores (not the assistant's)"
        if excluded
        else "sessions by termination reason"
    )
    table = Table(title=title, title_justify="left", min_width=len(title))
    table.add_column("reason")
    _run_columns(table, reports)
    per_run = [reason_counts(r)[1 if excluded else 0] for r in reports]
    reasons = sorted({k for counts in per_run for k in counts}, key=lambda k: (-per_run[0].get(k, 0), k))
    for reason in reasons:
        values = [float(c.get(reason, 0)) for c in per_run]
        cells = [Text(fmt(v, "count")) for v in values]
        if len(reports) == 2:
            cells.append(Text(fmt_delta(values[0], values[1], "count")))
        table.add_row(Text(reason), *cells)
    if not reasons:
        table.add_row(Text("none"), *[Text("0") for _ in range(len(table.columns) - 1)])
    return table


def _cell(metrics: list[Metrics | None], get) -> Text:
    values = [get(m) if m is not None else None for m in metrics]
    if len(values) == 1:
        return Text(fmt(values[0]))
    return Text(f"{fmt(values[0])} → {fmt(values[1])} ({fmt_delta(values[0], values[1])})")


def dimension_table_view(reports: list[RunReport], dimension: str) -> Table:
    table = Table(title=f"by {dimension}", title_justify="left")
    table.add_column(dimension)
    table.add_column("sessions", justify="right")
    for label, _ in DIMENSION_COLUMNS:
        table.add_column(label, justify="right")
    for value, metrics in dimension_table(reports, dimension):
        sessions = " → ".join(fmt(float(m.sessions), "count") if m else "–" for m in metrics)
        table.add_row(Text(value), Text(sessions), *[_cell(metrics, get) for _, get in DIMENSION_COLUMNS])
    return table


def turn_changes_line(comparison: Comparison) -> Text:
    c = comparison.turn_counts
    return Text(
        f"turns {comparison.before_run} → {comparison.after_run}: {c['improved']} improved, "
        f"{c['regressed']} regressed, {c['unchanged']} unchanged, "
        f"{c['only_before'] + c['only_after']} in one run only, {c['excluded']} excluded"
    )


def judge_line(report: RunReport) -> Text | None:
    """The optional LLM judge: its model and prompt, and how often it agreed with the deterministic checks."""
    counted = judge_agreement(report)
    if not report.judge and counted is None:
        return None
    described = ", ".join(f"{k} {v}" for k, v in (report.judge or {}).items() if k != "agreement")
    line = f"LLM judge of {report.run}: {described or 'unnamed'}"
    if counted is not None:
        line += f"; agreed with the checks on {counted[0]} of {counted[1]} ({counted[0] / counted[1]:.3f})"
    return Text(line)


def counts_line(report: RunReport) -> str:
    """Every session the run holds: scored, unscored with why, and superseded by a rerun (none left out)."""
    counted = counted_sessions(report)
    unscored: dict[str, int] = {}
    for s in counted:
        if s.score is None:
            why = s.excluded or "unscored"
            if s.error and why == "unscorable":
                why = f"unscorable: {s.error}"[:60]
            unscored[why] = unscored.get(why, 0) + 1
    scored = len(counted) - sum(unscored.values())
    detail = ", ".join(f"{n} {why}" for why, n in sorted(unscored.items()))
    safety = (report.metrics.model_extra or {}).get("safety_failures")  # an open figure of the scorer
    superseded = len(report.sessions) - len(counted)
    return (f"{len(report.sessions)} sessions: {scored} scored, {sum(unscored.values())} unscored"
            + (f" ({detail})" if detail else "")
            + (f", {superseded} superseded by their reruns" if superseded else "")
            + (f" · {safety} safety failures" if safety else ""))


def summary(report: RunReport, other: RunReport | None = None, comparison: Comparison | None = None) -> Group:
    reports = [report] + ([other] if other is not None else [])
    header = Text(f"run {report.run} · scorer {report.scorer_version} · {counts_line(report)}", style="bold")
    if other is not None:
        header.append(
            f"  vs  run {other.run} · scorer {other.scorer_version}  (Δ = {other.run} − {report.run})"
        )
    parts: list[RenderableType] = [
        header,
        metrics_table(reports),
        reasons_table(reports, excluded=False),
        reasons_table(reports, excluded=True),
    ]
    parts += [dimension_table_view(reports, d) for d in TERMINAL_DIMENSIONS]
    parts += [line for r in reports if (line := judge_line(r)) is not None]
    if comparison is not None:
        parts.append(turn_changes_line(comparison))
    return Group(*parts)


def print_summary(
    console: Console, report: RunReport, other: RunReport | None = None, comparison: Comparison | None = None
) -> None:
    console.print(summary(report, other, comparison))
