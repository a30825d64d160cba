"""The terminal summary of `rounds report`: metrics, termination reasons and the difficulty/language
breakdowns of one run, or of two runs side by side with deltas (after − before) when `--compare` is given.

Every cell is a rich `Text`, never markup: names come from scenario files and could hold `[...]`.
"""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from contracts.score import RunReport
from services.consumers.report.answers_view import terminal_tables
from services.consumers.report.comparison_model import Comparison
from services.consumers.report.stats import counted_sessions, judge_agreement, reason_counts
from services.consumers.report.summary import (
    DIMENSION_COLUMNS,
    dimension_table,
    fmt,
    fmt_delta,
    fmt_with_ci,
    metric_rows,
)
from services.consumers.statistics.paired import Paired
from services.consumers.statistics.power import Plan, trials_effect

TERMINAL_DIMENSIONS = ("difficulty", "language")


def _run_columns(table: Table, reports: list[RunReport]) -> None:
    for r in reports:
        table.add_column(Text(r.run), justify="right")
    if len(reports) == 2:
        table.add_column("Δ", justify="right")


def metrics_table(reports: list[RunReport]) -> Table:
    table = Table(
        title="metrics",
        caption=Text("[lo, hi]: 95 % interval clustered by scenario; infrastructure/patient errors excluded"),
        title_justify="left",
        caption_justify="left",
    )
    table.add_column("metric")
    _run_columns(table, reports)
    for row in metric_rows(reports):
        cis = row.intervals or [None] * len(row.values)
        cells = [Text(fmt_with_ci(v, ci) if row.kind == "score" else fmt(v, row.kind))
                 for v, ci in zip(row.values, cis, strict=True)]
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


def dimension_table_view(reports: list[RunReport], dimension: str) -> Table:
    """One row per value; with two runs, a row per run (each figure with its interval) and a Δ row, so the
    intervals fit a terminal."""
    table = Table(title=f"by {dimension}", title_justify="left")
    table.add_column(dimension)
    if len(reports) == 2:
        table.add_column("run")
    table.add_column("sessions", justify="right")
    for figure in DIMENSION_COLUMNS:
        table.add_column(figure.label, justify="right")
    for value, metrics in dimension_table(reports, dimension):
        for i, (r, m) in enumerate(zip(reports, metrics, strict=True)):
            cells = [Text(fmt_with_ci(f.value(m), f.interval(m)) if m else "–") for f in DIMENSION_COLUMNS]
            run = [Text(r.run)] if len(reports) == 2 else []
            table.add_row(Text(value if i == 0 else ""), *run,
                          Text(fmt(float(m.sessions), "count") if m else "–"), *cells)
        if len(reports) == 2:
            deltas = [Text(fmt_delta(*[f.value(m) if m else None for m in metrics]))
                      for f in DIMENSION_COLUMNS]
            table.add_row(Text(""), Text("Δ"), Text(""), *deltas, end_section=True)
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


UNMATCHED_SHOWN = 20  # the page lists every one


def paired_view(paired: Paired) -> list[RenderableType]:
    """The verdict in words, the paired differences with their intervals and p-values, McNemar's test on
    Pass@Session and the sessions that could not be paired."""
    table = Table(title=f"paired: {paired.after_run} − {paired.before_run} on {paired.matched} matched "
                        "sessions (scenario, language, variant, trial)", title_justify="left")
    for name in ("figure", "Δ", "95 % interval", "p", "test"):
        table.add_column(name, justify="left" if name in ("figure", "test") else "right")
    for name, d in (("Avg (matched turns)", paired.avg), ("Pass@Session τ=0.75", paired.pass_at_session)):
        if d is not None:
            table.add_row(Text(name), Text(f"{d.value:+.3f}"), Text(f"[{d.lo:+.3f}, {d.hi:+.3f}]"),
                          Text(f"{d.p_value:.3g}"),
                          Text(f"sign-flip permutation over {d.n_clusters} scenarios"))
    m = paired.mcnemar
    table.add_row(Text("Pass@Session τ=0.75"), Text(f"{m.b_only - m.a_only:+d} sessions"), Text(""),
                  Text(f"{m.p_value:.3g}"),
                  Text(f"McNemar exact: {m.b_only} pass only in {paired.after_run}, {m.a_only} only in "
                       f"{paired.before_run}"))
    out: list[RenderableType] = [Text(paired.verdict(), style="bold"), table]
    if paired.unmatched:
        shown = "; ".join(f"{name}: {why}" for name, why in paired.unmatched[:UNMATCHED_SHOWN])
        more = len(paired.unmatched) - UNMATCHED_SHOWN
        out.append(Text(f"{len(paired.unmatched)} sessions not paired: {shown}"
                        + (f"; and {more} more (all in the HTML page)" if more > 0 else "")))
    return out


def planning_view(report: RunReport, plan: Plan | None) -> list[RenderableType]:
    """The trials' effect on the interval (with more than one trial), the sample size a difference needs."""
    out: list[RenderableType] = []
    effect = trials_effect(report)
    if effect is not None:
        out.append(Text(f"trials of {report.run}: {effect.line()}"))
    if plan is not None:
        out += [Text(line) for line in plan.lines()]
    return out


def summary(report: RunReport, other: RunReport | None = None, comparison: Comparison | None = None,
            paired: Paired | None = None, plan: Plan | None = None) -> Group:
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
    parts += terminal_tables(reports)
    parts += [line for r in reports if (line := judge_line(r)) is not None]
    if comparison is not None:
        parts.append(turn_changes_line(comparison))
    if paired is not None:
        parts += paired_view(paired)
    parts += planning_view(report, plan)
    return Group(*parts)


def print_summary(
    console: Console, report: RunReport, other: RunReport | None = None, comparison: Comparison | None = None,
    paired: Paired | None = None, plan: Plan | None = None,
) -> None:
    console.print(summary(report, other, comparison, paired, plan))
