"""The self-contained HTML report: one file with inline CSS, inline SVG plots and one small inline script, so
it opens from disk or an e-mail attachment with no network. Sections: summary tables (metrics, termination
reasons with excluded sessions apart, tool metrics, the optional LLM judge, every breakdown dimension),
plots, the turn-by-turn comparison when a second run is given, then each run's sessions.
"""

from __future__ import annotations

from base64 import b64encode
from collections.abc import Sequence
from hashlib import sha256
from html import escape

from contracts.score import DIMENSIONS, RunReport
from services.consumers.report.answers_view import answers_html
from services.consumers.report.compare import compare_runs
from services.consumers.report.comparison_model import Comparison
from services.consumers.report.html_charts import charts_section
from services.consumers.report.html_compare import compare_section
from services.consumers.report.html_sessions import sessions_section
from services.consumers.report.html_statistics import paired_section, planning_section
from services.consumers.report.html_style import CSS, SCRIPT
from services.consumers.report.model_usage import COLUMNS, ModelUsage, cost_line, rows, title
from services.consumers.report.stats import judge_agreement, reason_counts
from services.consumers.report.summary import (
    DIMENSION_COLUMNS,
    dimension_table,
    fmt,
    fmt_ci,
    fmt_delta,
    metric_rows,
)
from services.consumers.statistics.paired import Paired, compare_paired
from services.consumers.statistics.power import Plan

# the page's own script is the only one the browser may run: markup that slipped past escaping cannot run
SCRIPT_HASH = "sha256-" + b64encode(sha256(SCRIPT.encode()).digest()).decode()


def _run_headers(reports: Sequence[RunReport]) -> str:
    cells = "".join(f"<th>{escape(r.run)}</th>" for r in reports)
    return cells + ("<th>Δ</th>" if len(reports) == 2 else "")


def _values(values: Sequence[float | None], kind: str = "score") -> str:
    cells = "".join(f'<td class="num">{fmt(v, kind)}</td>' for v in values)  # type: ignore[arg-type]
    if len(values) == 2:
        cells += f'<td class="num">{fmt_delta(values[0], values[1], kind)}</td>'  # type: ignore[arg-type]
    return cells


def _ci(bounds: list[float] | None) -> str:
    """The interval after a value: a span whose data-lo/data-hi the tests and readers can check."""
    if not bounds:
        return ""
    return f' <span class="ci" data-lo="{bounds[0]:.6f}" data-hi="{bounds[1]:.6f}">{fmt_ci(bounds)}</span>'


def _values_ci(values: Sequence[float | None], intervals: Sequence[list[float] | None]) -> str:
    """Score cells with their 95 % intervals, and Δ when two runs are shown."""
    cells = "".join(f'<td class="num">{fmt(v)}{_ci(ci)}</td>'
                    for v, ci in zip(values, list(intervals) or [None] * len(values), strict=True))
    if len(values) == 2:
        cells += f'<td class="num">{fmt_delta(values[0], values[1])}</td>'
    return cells


def metrics_table(reports: Sequence[RunReport]) -> str:
    rows = "".join(
        f'<tr data-metric="{escape(row.label)}"><th>{escape(row.label)}</th>'
        + (_values_ci(row.values, row.intervals) if row.kind == "score" else _values(row.values, row.kind))
        + "</tr>"
        for row in metric_rows(reports)
    )
    return (
        '<table class="metrics"><caption>metrics (infrastructure/patient errors excluded; [lo, hi]: 95 % '
        f"interval clustered by scenario, {escape(_method(reports))})</caption>"
        f"<thead><tr><th>metric</th>{_run_headers(reports)}</tr></thead><tbody>{rows}</tbody></table>"
    )


def reasons_table(reports: Sequence[RunReport], excluded: bool) -> str:
    per_run = [reason_counts(r)[1 if excluded else 0] for r in reports]
    reasons = sorted({k for c in per_run for k in c}, key=lambda k: (-per_run[0].get(k, 0), k))
    rows = (
        "".join(
            f'<tr data-reason="{escape(reason)}"><th>{escape(reason)}</th>'
            f"{_values([float(c.get(reason, 0)) for c in per_run], 'count')}</tr>"
            for reason in reasons
        )
        or f'<tr><td colspan="{len(reports) + 2}" class="meta">none</td></tr>'
    )
    caption = "excluded from scores (not the assistant's)" if excluded else "sessions by termination reason"
    css = "reasons excluded" if excluded else "reasons"
    return (
        f'<table class="{css}"><caption>{caption}</caption><thead><tr><th>reason</th>'
        f"{_run_headers(reports)}</tr></thead><tbody>{rows}</tbody></table>"
    )


def tools_table(reports: Sequence[RunReport]) -> str:
    names = sorted({k for r in reports for k in r.metrics.tools})
    if not names:
        return ""
    rows = "".join(
        f'<tr data-tool="{escape(n)}"><th>{escape(n)}</th>'
        f"{_values([r.metrics.tools.get(n) for r in reports])}</tr>"
        for n in names
    )
    return (
        f'<table class="tools"><caption>tool use</caption><thead><tr><th>metric</th>'
        f"{_run_headers(reports)}</tr></thead><tbody>{rows}</tbody></table>"
    )


def judge_table(reports: Sequence[RunReport]) -> str:
    """What the scorer says about its LLM judge (model, prompt version…) and, counted from the turns, how
    often the judge agreed with the deterministic checks it was run beside."""
    rows = []
    for r in reports:
        for k, v in (r.judge or {}).items():
            rows.append(f"<tr><th>{escape(r.run)}</th><td>{escape(str(k))}</td><td>{escape(str(v))}</td></tr>")
        counted = judge_agreement(r)
        if counted is not None:
            agree, total = counted
            rows.append(
                f'<tr class="judge-agreement" data-agree="{agree}" data-total="{total}">'
                f"<th>{escape(r.run)}</th><td>agreement with the checks (counted)</td>"
                f"<td>{agree / total:.3f} ({agree}/{total})</td></tr>"
            )
    if not rows:
        return ""
    return (
        '<table class="judge"><caption>LLM judge (model, prompt version, agreement with the deterministic '
        f"checks)</caption><tbody>{''.join(rows)}</tbody></table>"
    )


def model_tables(reports: Sequence[RunReport]) -> str:
    """The model's latency, tokens and cost per run that called one (the terminal's table, same rows)."""
    out = []
    for r in reports:
        if not r.model_usage:
            continue
        usage = ModelUsage.model_validate(r.model_usage)
        body = "".join(
            f'<tr data-measure="{escape(label)}"><th>{escape(label)}</th>'
            + "".join(f"<td>{escape(cell)}</td>" for cell in cells) + "</tr>"
            for label, *cells in rows(usage)
        )
        cost = cost_line(usage)
        foot = f'<tfoot><tr class="cost"><td colspan="5">{escape(cost)}</td></tr></tfoot>' if cost else ""
        out.append(
            f'<table class="model" data-run="{escape(r.run)}" data-calls="{usage.calls}">'
            f"<caption>{escape(r.run)}: {escape(title(usage))}</caption><thead><tr><th>measure</th>"
            + "".join(f"<th>{c}</th>" for c in COLUMNS) + f"</tr></thead><tbody>{body}</tbody>{foot}</table>"
        )
    if not out:
        return ""
    return f'<section id="model"><h2>Model calls</h2><div class="tables">{"".join(out)}</div></section>'


def dimension_html(reports: Sequence[RunReport], dimension: str) -> str:
    table = dimension_table(reports, dimension)
    if not table:
        return ""
    head = "".join(f"<th>{escape(f.label)}</th>" for f in DIMENSION_COLUMNS)
    rows = []
    for value, metrics in table:
        cells = "".join(
            '<td class="num">'
            + " → ".join(fmt(f.value(m)) + _ci(f.interval(m)) if m else "–" for m in metrics)
            + (f" ({fmt_delta(*[f.value(m) if m else None for m in metrics])})" if len(metrics) == 2 else "")
            + "</td>"
            for f in DIMENSION_COLUMNS
        )
        sessions = " → ".join(str(m.sessions) if m else "–" for m in metrics)
        rows.append(
            f'<tr data-value="{escape(value)}"><th>{escape(value)}</th><td class="num">{sessions}</td>'
            f"{cells}</tr>"
        )
    return (
        f'<table class="by" data-dimension="{escape(dimension)}"><caption>by {escape(dimension)}</caption>'
        f"<thead><tr><th>{escape(dimension)}</th><th>sessions</th>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _method(reports: Sequence[RunReport]) -> str:
    return next((r.metrics.method for r in reports if r.metrics.method), "no intervals in this document")


def _dimensions(reports: Sequence[RunReport]) -> list[str]:
    present = {d for r in reports for d in r.by}
    return [d for d in DIMENSIONS if d in present] + sorted(present - set(DIMENSIONS))


def _header(report: RunReport, other: RunReport | None, more: Sequence[RunReport] = ()) -> str:
    def describe(r: RunReport) -> str:
        parts = [f"scorer {r.scorer_version}"]
        if r.assistant:
            parts.append(f"assistant {r.assistant}")
        if r.replay_of:
            parts.append(f"replay of {r.replay_of}")
        return f"<strong>{escape(r.run)}</strong> ({escape(', '.join(parts))})"

    runs = describe(report) + (
        f" compared with {describe(other)}; Δ = {escape(other.run)} − {escape(report.run)}"
        if other is not None
        else ""
    )
    if more:
        runs += "; also " + ", ".join(describe(r) for r in more)
    return f'<h1>Rounds report: {escape(report.run)}</h1><p class="meta">{runs}</p>'


def render_html(
    report: RunReport,
    other: RunReport | None = None,
    max_sessions: int | None = None,
    comparison: Comparison | None = None,
    more: Sequence[RunReport] = (),
    paired: Paired | None = None,
    plan: Plan | None = None,
) -> str:
    """The whole page as one string; `other` adds the side-by-side columns and the turn-by-turn comparison
    (`comparison`, computed when not given); `max_sessions` caps the sessions listed per run and the pairs
    compared (tables, plots and counts use them all). `more` adds further runs to the tables, plots and
    session lists (e.g. several assistants on the same scenarios), without deltas or turn comparison.
    `paired` (computed when not given) is the paired test of `other` against `report`; `plan` the sample size
    a difference needs (`rounds report --power`)."""
    reports = [report] + ([other] if other is not None else []) + list(more)
    summary = (
        '<section id="summary"><h2>Summary</h2><div class="tables">'
        + metrics_table(reports)
        + reasons_table(reports, excluded=False)
        + reasons_table(reports, excluded=True)
        + tools_table(reports)
        + judge_table(reports)
        + "</div>"
        + '<div class="tables">'
        + "".join(dimension_html(reports, d) for d in _dimensions(reports))
        + "</div>"
        + planning_section(reports[:1], plan)
        + "</section>"
        + answers_html(reports)
    )
    compare = ""
    if other is not None:
        compare = paired_section(paired or compare_paired(report, other))
        compare += compare_section(comparison or compare_runs(report, other), max_sessions)
    sessions = "".join(sessions_section(r, max_sessions) for r in reports)
    title = "Rounds report: " + " vs ".join(r.run for r in reports)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # no network: nothing may load from anywhere
        "<meta http-equiv=\"Content-Security-Policy\" "
        f"content=\"default-src 'none'; style-src 'unsafe-inline'; "
        f"script-src '{SCRIPT_HASH}'; img-src data:\">"
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
        f"{_header(report, other, more)}{summary}{model_tables(reports)}{charts_section(reports)}{compare}"
        f"{sessions}"
        f"<script>{SCRIPT}</script></body></html>\n"
    )
