"""`rounds run` and `rounds replay` composed: the simulator runs the sessions and prints its summary, then
the consumers report the run (the model calls it made, its scores when asked).

The simulator and the consumers are siblings that import nothing from each other; this module, on the
composition floor above both, is where a run meets its scorer and report.
"""

from __future__ import annotations

import typer

from rounds.wiring import Wiring
from services.simulator.orchestrator.cli import register_run
from services.simulator.orchestrator.jobs import RunSummary


def report_run(summary: RunSummary, wiring: Wiring, *, score: bool, fhir_base: str | None) -> None:
    """After the simulator's summary: the model-usage table when a model was called, then the scores."""
    from rich.console import Console

    console = Console()
    if any(o.model_calls for o in summary.outcomes):
        from services.consumers.report.model_usage import load_model_usage, usage_table

        console.print(usage_table(load_model_usage(wiring.bus(), summary.run_id)))
    if score:
        print_scores(summary, wiring, console, fhir_base)


def print_scores(summary: RunSummary, wiring: Wiring, console, fhir_base: str | None = None) -> None:
    """Score the run in-process with the scorer (services/consumers/scoring) and print its metrics table."""
    import httpx

    from services.consumers.report.terminal import metrics_table
    from services.consumers.scoring.api import score_run

    root = fhir_base.rstrip("/").removesuffix("/fhir") if fhir_base else None
    client = httpx.Client(base_url=root, timeout=60) if root else None
    try:
        report = score_run(wiring, summary.run_id, client=client)
    except Exception as exc:  # noqa: BLE001 - the sessions are on the log whatever the scorer thinks
        console.print(f"scores: the scorer failed ({exc!r}); score the run later (`rounds report`)")
        return
    finally:
        if client is not None:
            client.close()
    console.print(metrics_table([report]))


def register(app: typer.Typer) -> None:
    register_run(app, after_run=report_run)
