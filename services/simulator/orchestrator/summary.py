"""The one-screen summary a run prints when it ends (sessions by end reason, throughput, the first failures),
and the hook through which whoever started the run reports it further.

The simulator knows nothing of scoring or the report: `rounds run` and `rounds replay` hand their summary to
an `AfterRun` the composition root supplies (rounds/run_command.py prints model usage and scores there).
"""

from __future__ import annotations

from typing import Protocol

from services.simulator.orchestrator.jobs import RunSummary


class AfterRun(Protocol):
    """Reports an ended run beyond the simulator's own summary (`score`: the run should be scored now;
    `fhir_base`: the separate FHIR server the sessions used, None when in-process)."""

    def __call__(self, summary: RunSummary, *, score: bool, fhir_base: str | None) -> None: ...


def print_summary(summary: RunSummary, after_run: AfterRun | None = None, *, score: bool = False,
                  fhir_base: str | None = None) -> None:
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
    if after_run is not None:
        after_run(summary, score=score, fhir_base=fhir_base)
