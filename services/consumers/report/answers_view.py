"""A question-answering suite's tables (FHIR-AgentBench), like the paper's: answer correctness, retrieval
recall and precision overall and by main table, gold resource type and template, each with its 95 %
interval — for the terminal (without the templates) and the HTML page. Runs without the suite's checks
show nothing here.

The figures are computed by services/consumers/scoring/answer_metrics.py (the report's `metrics` and
`answers.by`); this module only lays them out, one table per breakdown with a column per run.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from rich.table import Table
from rich.text import Text

from contracts.score import RunReport
from services.consumers.report.summary import fmt_with_ci

FIGURES = (("correct", "answer_correctness"), ("recall", "retrieval_recall"),
           ("precision", "retrieval_precision"))
BREAKDOWNS = ("main_table", "resource_type", "template")
TERMINAL_BREAKDOWNS = ("main_table", "resource_type")  # templates (~50 long sentences): the HTML page


def _overall(report: RunReport) -> dict[str, Any]:
    extra = report.metrics.model_extra or {}
    ci = (report.metrics.ci95.model_extra or {}) if report.metrics.ci95 is not None else {}
    return {"questions": (report.answers or {}).get("questions"), "ci95": ci,
            **{name: extra.get(name) for _, name in FIGURES}}


Figures = dict[str, Any]


def rows(reports: Sequence[RunReport], breakdown: str | None) -> list[tuple[str, list[Figures | None]]]:
    """(label, each run's figures or None) for the overall line (`breakdown` None) or every value of one."""
    if breakdown is None:
        return [("all questions", [_overall(r) for r in reports])]
    values = sorted({v for r in reports for v in ((r.answers or {}).get("by", {}).get(breakdown) or {})})
    return [(v, [((r.answers or {}).get("by", {}).get(breakdown) or {}).get(v) for r in reports])
            for v in values]


def cells(figures: dict[str, Any] | None) -> list[str]:
    if figures is None:
        return ["–"] * (len(FIGURES) + 1)
    ci = figures.get("ci95") or {}
    n = figures.get("questions")
    return [str(n) if n is not None else "–"] + [fmt_with_ci(figures.get(name), ci.get(name))
                                                for _, name in FIGURES]


def _present(reports: Sequence[RunReport]) -> bool:
    return any(r.answers for r in reports)


def terminal_tables(reports: Sequence[RunReport]) -> list[Table]:
    if not _present(reports):
        return []
    out = []
    for breakdown in (None, *TERMINAL_BREAKDOWNS):
        table = Table(title=f"answers by {breakdown}" if breakdown else "answers (FHIR-AgentBench figures)",
                      title_justify="left")
        table.add_column(breakdown or "")
        for r in reports:
            table.add_column(Text(f"{r.run}: n"), justify="right")
            for label, _ in FIGURES:
                table.add_column(Text(f"{label}"), justify="right")
        for label, found in rows(reports, breakdown):
            table.add_row(Text(label[:60]), *[Text(c) for f in found for c in cells(f)])
        out.append(table)
    return out


def answers_html(reports: Sequence[RunReport]) -> str:
    if not _present(reports):
        return ""
    head = "".join(f"<th>{escape(r.run)}: n</th>" + "".join(f"<th>{label}</th>" for label, _ in FIGURES)
                   for r in reports)
    tables = []
    for breakdown in (None, *BREAKDOWNS):
        body = "".join(
            f'<tr data-answers="{escape(label)}"><th>{escape(label)}</th>'
            + "".join(f"<td>{escape(c)}</td>" for f in found for c in cells(f)) + "</tr>"
            for label, found in rows(reports, breakdown))
        caption = f"by {breakdown}" if breakdown else "all questions"
        tables.append(f'<table class="answers" data-breakdown="{escape(breakdown or "all")}">'
                      f"<caption>{escape(caption)}</caption><thead><tr><th></th>{head}</tr></thead>"
                      f"<tbody>{body}</tbody></table>")
    return ('<section id="answers"><h2>Answers (FHIR-AgentBench figures: correct, retrieval recall and '
            'precision, 95 % intervals clustered by scenario)</h2><div class="tables">'
            + "".join(tables) + "</div></section>")
