"""`rounds run` (and `rounds replay`): sessions of a scenario file against an assistant, with a progress bar
and a one-screen summary (sessions by end reason; scores when the scorer is installed)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from services.simulator.orchestrator.run import RunSummary

LANGUAGES = {"en": ("en",), "zh": ("zh",), "both": ("en", "zh")}


def print_summary(summary: RunSummary, *, score: bool = False, fhir_base: str | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"run {summary.run_id}", show_header=True)
    table.add_column("end reason")
    table.add_column("sessions", justify="right")
    for reason, count in sorted(summary.by_reason.items()):
        table.add_row(reason, str(count))
    console.print(table)
    rate = summary.events / summary.wall_s if summary.wall_s else 0.0
    console.print(
        f"{len(summary.outcomes)} sessions run, {summary.skipped} already ended (resumed), "
        f"{summary.turns} turns, {summary.events} simulator events, {summary.wall_s:.1f} s "
        f"({rate:,.0f} events/s)"
    )
    for outcome in [o for o in summary.outcomes if o.reason != "completed"][:5]:
        console.print(f"  {outcome.session_id} {outcome.job.scenario.id} {outcome.reason}: {outcome.error}")
    if score:
        print_scores(summary, console, fhir_base)


def print_scores(summary: RunSummary, console, fhir_base: str | None = None) -> None:
    """Score the run in-process with the scorer (services/consumers/scoring) and print its metrics table."""
    import httpx

    from rounds.settings import get_settings
    from services.consumers.report.terminal import metrics_table
    from services.consumers.scoring.api import score_run

    root = fhir_base.rstrip("/").removesuffix("/fhir") if fhir_base else None
    client = httpx.Client(base_url=root, timeout=60) if root else None
    try:
        report = score_run(get_settings(), summary.run_id, client=client)
    except Exception as exc:  # noqa: BLE001 - the sessions are on the log whatever the scorer thinks
        console.print(f"scores: the scorer failed ({exc!r}); score the run later (`rounds report`)")
        return
    finally:
        if client is not None:
            client.close()
    console.print(metrics_table([report]))


def register(app: typer.Typer) -> None:
    @app.command("run")
    def run_cmd(
        scenarios: Annotated[Path, typer.Option(exists=True, dir_okay=False, help="scenario JSONL file")],
        assistant: Annotated[str, typer.Option(help="baseline | oracle | weak | python:mod:fn | http:URL | "
                                                    "openai:MODEL[@BASE] | mcp:...")],
        trials: Annotated[int, typer.Option(min=1, help="sessions per scenario and language (pass^k)")] = 1,
        concurrency: Annotated[int, typer.Option(min=1, help="sessions at once")] = 8,
        language: Annotated[str, typer.Option(help="en | zh | both")] = "en",
        variant: Annotated[str, typer.Option(help="implicit | explicit physician phrasing")] = "implicit",
        run_id: Annotated[str | None, typer.Option(help="resume this run (skips ended sessions)")] = None,
        limit: Annotated[int | None, typer.Option(min=1, help="only the first N scenarios")] = None,
        fhir_base: Annotated[str | None, typer.Option(help="a separate `rounds serve` (default: in-process)")]
        = None,
        turn_timeout: Annotated[float, typer.Option(help="seconds an assistant has per turn")] = 120.0,
        max_steps: Annotated[int, typer.Option(min=1, help="tool steps per turn")] = 8,
        seed: Annotated[int, typer.Option()] = 0,
        score: Annotated[bool, typer.Option("--score/--no-score", help="score the run when it ends")] = True,
        patient_voice: Annotated[str | None, typer.Option(
            help="openai:<model>[@<base_url>]: an LLM rephrases the patient's replies (verified, else the "
                 "deterministic words)")] = None,
    ) -> None:
        """Run sessions between the physician and patient agents and an assistant; every message an event."""
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from services.simulator.orchestrator.run import new_run_id, plan, read_scenarios
        from services.simulator.orchestrator.runner import RunOptions, run_scenarios

        if language not in LANGUAGES or variant not in ("implicit", "explicit"):
            raise typer.BadParameter("--language en|zh|both, --variant implicit|explicit")
        from services.simulator.assistants.registry import create_assistant

        try:
            lines = read_scenarios(scenarios, limit)
            chosen = create_assistant(assistant)
            if patient_voice:
                from services.simulator.agents.voice import create_voice

                voice = create_voice(patient_voice)
        except ValueError as exc:  # a bad line (file:line) or an unknown / malformed assistant spec
            typer.echo(f"rounds run: {exc}", err=True)
            raise typer.Exit(2) from None
        jobs = plan(lines, trials, LANGUAGES[language], variant)
        resume = run_id is not None  # a fresh run id has nothing to resume: the log is not scanned
        run_id = run_id or new_run_id()
        typer.echo(f"run {run_id}: {len(jobs)} sessions ({len(lines)} scenarios)")
        options = RunOptions(run_id, concurrency, fhir_base, turn_timeout, max_steps, seed, resume=resume,
                             voice=voice if patient_voice else None)
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("{task.fields[last]}"), TimeElapsedColumn()) as bar:
            task = bar.add_task("sessions", total=len(jobs), last="")
            summary = asyncio.run(run_scenarios(
                jobs, chosen, options,
                progress=lambda o: bar.update(task, advance=1, last=o.reason)))
            bar.update(task, completed=len(jobs))
        typer.echo(f"run id: {run_id}")
        print_summary(summary, score=score, fhir_base=fhir_base)

    from services.simulator.orchestrator.replay import register_replay

    register_replay(app)
