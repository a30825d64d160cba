"""What `rounds run` shows while it runs: bars of sessions and turns, the model calls of the turns in
progress, and one line per finished turn (session, scenario, turn, model calls, seconds).

A local model can take minutes per turn; a bar that counted whole sessions sat still for all of them. The turn
lines go above the bars on a terminal and are plain lines in a log.
"""

from __future__ import annotations

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from services.simulator.orchestrator.session_loop import SessionJob, SessionOutcome, TurnProgress


class RunProgress:
    def __init__(self, jobs: list[SessionJob]) -> None:
        self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[now]}"), TimeElapsedColumn())
        self.sessions = self.bar.add_task("sessions", total=len(jobs), now="")
        self.turns = self.bar.add_task("turns", total=sum(len(j.scenario.turns) for j in jobs), now="")
        self.open: dict[str, str] = {}  # session id -> "turn t/n: k model calls"

    def __enter__(self) -> RunProgress:
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.bar.stop()

    def turn(self, p: TurnProgress) -> None:
        """A model call or a turn finished in session `p.session_id`."""
        where = f"{p.session_id[:8]} turn {p.turn + 1}/{p.turns}"
        if p.finished:
            self.open.pop(p.session_id, None)
            self.bar.console.print(f"{where} done ({p.scenario}): {p.model_calls} model calls, "
                                   f"{p.seconds:.1f} s", highlight=False)
            self.bar.advance(self.turns)
        else:
            self.open[p.session_id] = f"{where}: {p.model_calls} model calls"
        self.bar.update(self.turns, now="; ".join(list(self.open.values())[:3]))

    def session(self, outcome: SessionOutcome) -> None:
        self.open.pop(outcome.session_id or "", None)
        missing = len(outcome.job.scenario.turns) - outcome.turns  # turns it will never reach
        self.bar.update(self.turns, advance=missing)
        self.bar.update(self.sessions, advance=1, now=f"last: {outcome.reason}")
