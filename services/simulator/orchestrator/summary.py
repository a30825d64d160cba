"""The one-screen summary a run prints when it ends (sessions by end reason, the turns reached and answered,
every failure reason with its count and its first sessions, a run that never read the EHR), and the hook
through which whoever started the run reports it further.

The simulator knows nothing of scoring or the report: `rounds run` and `rounds replay` hand their summary to
an `AfterRun` the composition root supplies (rounds/run_command.py prints model usage and scores there).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Protocol

from rounds.wiring import Wiring
from services.simulator.orchestrator.jobs import RunSummary
from services.simulator.orchestrator.session_loop import SessionOutcome

SHOWN_PER_REASON = 3  # sessions listed under each end reason; the rest are counted
NO_TOOLS_HINT = ("with a local server this usually means its chat format drops the tools: start "
                 "llama-cpp-python with --chat_format chatml-function-calling, or use an Ollama/vLLM model "
                 "with tool support")


class AfterRun(Protocol):
    """Reports an ended run beyond the simulator's own summary, on the process's `wiring` (`score`: the run
    should be scored now; `fhir_base`: the separate FHIR server the sessions used, None when in-process)."""

    def __call__(self, summary: RunSummary, wiring: Wiring, *, score: bool,
                 fhir_base: str | None) -> None: ...


def turn_line(summary: RunSummary) -> str:
    """Turns as contracts/score.py TURN_COUNTS defines them, the same words the progress bar and the
    report use."""
    return (f"turns: {summary.turns} answered, {summary.turns_reached} reached, of "
            f"{summary.scenario_turns} (a turn not reached scores 0)")


def failure_lines(outcomes: list[SessionOutcome]) -> list[str]:
    """Every end reason but `completed` with its count, then its first sessions and how many more."""
    by_reason: dict[str, list[SessionOutcome]] = defaultdict(list)
    for outcome in outcomes:
        if outcome.reason != "completed":
            by_reason[outcome.reason].append(outcome)
    lines = []
    for reason, ended in sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        lines.append(f"{reason}: {len(ended)} session{'s' if len(ended) != 1 else ''}")
        for outcome in ended[:SHOWN_PER_REASON]:
            turn = max(outcome.reached - 1, 0)
            lines.append(f"  {outcome.session_id} {outcome.job.scenario.id} (turn {turn}): {outcome.error}")
        if len(ended) > SHOWN_PER_REASON:
            lines.append(f"  and {len(ended) - SHOWN_PER_REASON} more")
    return lines


def no_tools_warning(summary: RunSummary) -> str | None:
    """Said when the assistant answered turns without a single EHR request: its answers cannot come from
    the record, and a model server that drops the tools looks exactly like this."""
    if summary.turns == 0 or summary.ehr_requests:
        return None
    said = (f"warning: the assistant answered {summary.turns} turns without one EHR request: no answer of "
            "this run comes from the record")
    return f"{said}; {NO_TOOLS_HINT}" if summary.assistant.startswith("openai:") else said


def print_summary(summary: RunSummary, after_run: AfterRun | None = None, wiring: Wiring | None = None, *,
                  score: bool = False, fhir_base: str | None = None) -> None:
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
        f"{len(summary.outcomes)} sessions run, {summary.skipped} already ended (resumed); "
        f"{turn_line(summary)}; {summary.ehr_requests} EHR requests, {summary.events} simulator events, "
        f"{summary.wall_s:.1f} s ({rate:,.0f} events/s)", highlight=False)
    for line in failure_lines(summary.outcomes):
        console.print(line, highlight=False, markup=False)
    if (warning := no_tools_warning(summary)) is not None:
        console.print(warning, style="bold yellow", highlight=False, markup=False)
    if after_run is not None and wiring is not None:
        after_run(summary, wiring, score=score, fhir_base=fhir_base)
