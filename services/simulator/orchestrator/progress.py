"""What `rounds run` shows while it runs: bars of sessions and turns, the model calls of the turns in
progress, and one line per finished turn (session, scenario, turn, model calls, seconds).

A local model can take minutes per turn; a bar that counted whole sessions sat still for all of them. The turn
lines go above the bars on a terminal and are plain lines in a log. The turns bar counts turns answered
(contracts/score.py TURN_COUNTS) against the scenarios' turns; turns a session will never reach are named
beside it, never counted as done. When the first `EARLY_TURNS` answered turns made no EHR request at all,
one line says so at once (a local server that drops the tools otherwise shows only at the end, hours later).
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from services.simulator.orchestrator.session_loop import SessionJob, SessionOutcome, TurnProgress

EARLY_TURNS = 4


class RunProgress:
    def __init__(self, jobs: list[SessionJob], console: Console | None = None) -> None:
        self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[now]}"), TimeElapsedColumn(), console=console)
        self.sessions = self.bar.add_task("sessions", total=len(jobs), now="")
        self.turns = self.bar.add_task("turns", total=sum(len(j.scenario.turns) for j in jobs), now="")
        self.open: dict[str, str] = {}  # session id -> "turn t/n: k model calls"
        self.unreached = 0
        self.answered, self.requests, self.warned = 0, 0, False
        self.requests_of: dict[str, int] = {}  # session id -> its EHR requests so far

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
            self.answered += 1
        else:
            self.open[p.session_id] = f"{where}: {p.model_calls} model calls"
        self.requests_of[p.session_id] = p.ehr_requests
        self._warn_early()
        self._show()

    def _warn_early(self) -> None:
        if self.warned or self.answered < EARLY_TURNS or sum(self.requests_of.values()) + self.requests:
            return
        self.warned = True
        from services.simulator.orchestrator.summary import NO_TOOLS_HINT

        self.bar.console.print(f"warning: {self.answered} turns answered and not one EHR request yet; "
                               f"{NO_TOOLS_HINT}", style="bold yellow", highlight=False, markup=False)

    def _show(self) -> None:
        parts = list(self.open.values())[:3]
        if self.unreached:
            parts.insert(0, f"{self.unreached} not reached")
        self.bar.update(self.turns, now="; ".join(parts))

    def session(self, outcome: SessionOutcome) -> None:
        self.open.pop(outcome.session_id or "", None)
        self.requests += self.requests_of.pop(outcome.session_id or "", 0)
        self.unreached += outcome.scenario_turns - outcome.reached
        self._show()
        self.bar.update(self.sessions, advance=1, now=f"last: {outcome.reason}")
