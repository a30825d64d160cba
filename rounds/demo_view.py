"""What `rounds demo` shows: stage progress on a terminal, then one results table and where the report is."""

from __future__ import annotations

import logging
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from contracts.languages import LANGUAGES
from contracts.score import Metrics
from rounds.demo import DEMO_ASSISTANTS, DemoResult, run_demo
from rounds.options import DatabaseUrl
from rounds.settings import settings_for
from services.consumers.report.summary import Figure, fmt_with_ci

COLUMNS = (
    Figure("Avg", "avg"),
    Figure("P@Turn", "pass_at_turn", "0.75"),
    Figure("P@Sess", "pass_at_session", "0.75"),
)
AVG = COLUMNS[0]
BREAKDOWNS = (("difficulty", ("L1", "L2", "L3")), ("language", LANGUAGES))


def _fmt(metrics: Metrics, figure: Figure) -> str:
    """The figure and its 95 % interval (clustered by scenario), two decimals: the demo's table is narrow."""
    return fmt_with_ci(figure.value(metrics), figure.interval(metrics), 2)


def results_table(result: DemoResult) -> Table:
    """One row per assistant: the headline metrics, then Avg by difficulty and by language."""
    table = Table(
        title="Rounds demo: scored sessions per assistant",
        caption=Text("P@Turn, P@Sess: Pass@Turn, Pass@Session at τ = 0.75; L1–L3, en, zh: Avg; [lo, hi]: "
                     "95 % interval clustered by scenario; n: sessions scored"),
    )
    table.add_column("assistant", style="bold", no_wrap=True)
    for figure in COLUMNS:
        table.add_column(figure.label, justify="right", no_wrap=True)
    for _dimension, values in BREAKDOWNS:
        for value in values:
            table.add_column(value, justify="right")
    table.add_column("n", justify="right", no_wrap=True)
    for spec, report in result.reports.items():
        cells = [_fmt(report.metrics, figure) for figure in COLUMNS]
        for dimension, values in BREAKDOWNS:
            by = report.by.get(dimension, {})
            cells += [_fmt(by[v], AVG) if v in by else "–" for v in values]
        excluded = report.metrics.excluded_sessions
        cells.append(f"{report.metrics.sessions}" + (f" (+{excluded} excluded)" if excluded else ""))
        table.add_row(spec, *cells)
    return table


@contextmanager
def _quiet() -> Iterator[None]:
    """Library warnings and info logs are not the user's business during the demo."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            yield
        finally:
            root.setLevel(level)


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo_cmd(
        patients: int = typer.Option(8, "--patients", min=1, help="Synthetic patients to generate."),
        seed: int = typer.Option(1, "--seed"),
        mimic: Path | None = typer.Option(None, "--mimic", help="A MIMIC-IV folder (e.g. the demo) to use."),
        out: Path = typer.Option(Path("rounds-demo"), "--out", help="Where report.html and the files go."),
        sessions: int = typer.Option(16, "--sessions", min=1, help="Multi-turn scenarios to build."),
        workdir: Path | None = typer.Option(None, "--workdir", help="Where to write tables and NDJSON."),
        database_url: DatabaseUrl = None,
    ) -> None:
        """The whole loop: synthesize → map → load → scenarios → baseline/oracle/weak sessions → score →
        report.html."""
        console = Console()
        url = settings_for(database_url).database_url
        progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        with _quiet(), progress, tempfile.TemporaryDirectory(prefix="rounds-demo-") as tmp:
            stage = progress.add_task("starting", total=None)
            runs = progress.add_task("sessions", total=None, visible=False)

            def step(name: str) -> None:
                progress.update(stage, description=name)
                if name.startswith("run "):
                    progress.update(runs, visible=True, completed=0, total=None, description=name)

            result = run_demo(
                patients,
                seed,
                mimic,
                workdir or Path(tmp),
                url,
                out=out,
                sessions=sessions,
                assistants=DEMO_ASSISTANTS,
                step=step,
                on_session=lambda: progress.advance(runs),
            )
        console.print(results_table(result))
        total = sum(result.seconds.values())
        figures = result.figures
        console.print(
            f"{figures['loaded_resources']:,} FHIR resources, {figures['scenarios']} scenarios "
            f"({figures['turns']} turns) x EN+ZH, {figures['sessions']} sessions in {total:.0f} s"
        )
        console.print(f"report: {result.html.resolve()}")
