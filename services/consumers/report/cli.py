"""`rounds report`: the summary table of a scored run on the terminal, and on request the self-contained HTML
page and the JSON document; `--compare` puts a second run beside it (deltas, turn-by-turn comparison).

The run comes from the scorer (`--run`, through source.load_report) or from a JSON document written earlier
(`--from-json`, e.g. by `rounds report --json` on another machine). For `--run`, the model's latency, tokens
and (with `--prompt-price/--completion-price`) cost are read from the run's log (model_usage.py).
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from contracts.score import RunReport
from foundation.gcpause import gc_paused
from rounds.options import DatabaseUrl
from rounds.wiring import Wiring, wiring
from services.consumers.report.compare import compare_runs
from services.consumers.report.html_page import render_html
from services.consumers.report.json_io import ReportFileError, read_json, to_json
from services.consumers.report.model_usage import ModelUsage, load_model_usage, usage_table
from services.consumers.report.source import ReportUnavailable, load_report
from services.consumers.report.terminal import print_summary
from services.consumers.statistics.intervals import with_intervals
from services.consumers.statistics.paired import compare_paired
from services.consumers.statistics.power import plan_report

# a 1,000-session page is ~10 MiB and opens in a browser in seconds; 10,000 would be ~100 MiB
# (benchmarks/bench_report.py)
HTML_SESSIONS = 1000


def _from_file(path: Path, version: str | None, hint: str) -> RunReport:
    try:
        report = read_json(path)
    except ReportFileError as exc:
        raise typer.BadParameter(str(exc), param_hint=hint) from None
    if version is not None and report.scorer_version != version:
        raise typer.BadParameter(
            f"{path} holds scorer version {report.scorer_version!r}, not {version!r}", param_hint=hint
        )
    return report


def _from_scorer(wired: Wiring, run: str, version: str | None) -> RunReport:
    try:
        return load_report(wired, run, version)
    except ReportUnavailable as exc:
        typer.echo(f"rounds report: {exc}", err=True)
        raise typer.Exit(1) from None


def _with_intervals(report: RunReport) -> RunReport:
    """A document written before the scorer computed intervals gets them from its own sessions."""
    return report if report.metrics.ci95 is not None else with_intervals(report)


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        typer.echo(f"rounds report: cannot write {path}: {exc}", err=True)
        raise typer.Exit(1) from None


def register(app: typer.Typer) -> None:
    @app.command("report")
    def report_cmd(
        ctx: typer.Context,
        run: str | None = typer.Option(
            None, "--run", help="the run to report (from the scorer's projections)"
        ),
        scorer_version: str | None = typer.Option(None, "--scorer-version", help="default: the latest"),
        compare: str | None = typer.Option(
            None, "--compare", help="a second run shown beside it (Δ = it − RUN)"
        ),
        html: Path | None = typer.Option(None, "--html", help="write the self-contained HTML page here"),
        json_out: Path | None = typer.Option(None, "--json", help="write the scored-run JSON document here"),
        from_json: Path | None = typer.Option(
            None, "--from-json", help="render this JSON document instead of --run"
        ),
        compare_json: Path | None = typer.Option(
            None, "--compare-json", help="the compared run as a JSON document"
        ),
        html_sessions: int = typer.Option(
            HTML_SESSIONS, "--html-sessions", min=0,
            help="sessions listed per run in the HTML page, failing/excluded first (0: all)",
        ),
        database_url: DatabaseUrl = None,
        prompt_price: float | None = typer.Option(
            None, "--prompt-price", min=0, help="USD per million prompt tokens: the run's model cost"),
        completion_price: float | None = typer.Option(
            None, "--completion-price", min=0, help="USD per million completion tokens"),
        power: bool = typer.Option(
            False, "--power", help="print the scenarios and trials --power-d needs (80 % power)"),
        power_d: float = typer.Option(
            0.05, "--power-d", min=0.001, max=1.0, help="the difference in mean session score to detect"),
    ) -> None:
        """Summary table on the terminal; --html/--json write the page and the document."""
        if (run is None) == (from_json is None):
            raise typer.BadParameter("give exactly one of --run RUN and --from-json FILE", param_hint="--run")
        if compare is not None and compare_json is not None:
            raise typer.BadParameter(
                "give at most one of --compare and --compare-json", param_hint="--compare"
            )
        with gc_paused():  # a batch job: every session's objects stay alive until the views are written
            wired = wiring(ctx, database_url)
            if from_json is not None:
                report = _from_file(from_json, scorer_version, "--from-json")
            else:
                assert run is not None
                report = _from_scorer(wired, run, scorer_version)
            other = None
            if compare_json is not None:
                other = _from_file(compare_json, None, "--compare-json")
            elif compare is not None:
                other = _from_scorer(wired, compare, scorer_version)
            report = _with_intervals(report)
            other = _with_intervals(other) if other is not None else None
            comparison = compare_runs(report, other) if other is not None else None
            paired = compare_paired(report, other) if other is not None else None
            plan = plan_report(report, power_d, other) if power else None
            print_summary(Console(), report, other, comparison, paired, plan)
            if run is not None:  # the model's latency, tokens and cost, from the run's log
                usage = load_model_usage(wired.bus(), run, prompt_price, completion_price)
                if usage.calls:
                    report.model_usage = usage.model_dump()
            if report.model_usage:  # from the log, or kept in a --from-json document
                Console().print(usage_table(ModelUsage.model_validate(report.model_usage)))
            if html is not None:
                _write(html, render_html(report, other, html_sessions or None, comparison, paired=paired,
                                         plan=plan))
                typer.echo(f"wrote {html}")
            if json_out is not None:
                _write(json_out, to_json(report))
                typer.echo(f"wrote {json_out}")
