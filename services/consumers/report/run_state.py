"""What happened to a run that has no scores, read from its sessions on the log, and the one command that
moves it on: a run the pre-flight refused never started (nothing to score), an interrupted run is resumed
(its ended sessions are kept), and only a run whose sessions all ended is scored with `rounds score`.

`rounds report` says this instead of one generic "score it", which sent users of a never-started or
interrupted run to a command that could not help.
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from events.bus import Bus
from events.payloads import SessionEnded, SessionStarted


@dataclass
class RunState:
    started: int = 0
    ended: Counter = field(default_factory=Counter)  # end reason -> sessions
    assistant: str | None = None

    @property
    def open(self) -> int:
        """Sessions started and never ended (the process died, or the run is still going)."""
        return self.started - sum(self.ended.values())


def run_state(events: Iterable, run_id: str) -> RunState:
    state, started = RunState(), set()
    for event in events:
        if event is None or event.type not in (SessionStarted.TYPE, SessionEnded.TYPE):
            continue
        data = event.data or {}
        if data.get("runId") != run_id:
            continue
        if event.type == SessionStarted.TYPE:
            started.add(event.subject)
            state.assistant = state.assistant or data.get("assistant")
        else:
            state.ended[data.get("reason") or "?"] += 1
    state.started = len(started)
    return state


def next_step(state: RunState, run_id: str) -> str:
    """What happened to the run, and the command that moves it on."""
    resume = shlex.join(["rounds", "run", "--scenarios", "FILE", "--assistant", state.assistant or "SPEC",
                         "--run-id", run_id])
    if state.started == 0:
        return (f"run {run_id!r} has no session on the log: it never started (a pre-flight that refused the "
                "assistant's endpoint stops a run before its first session, as does a run id never used); "
                f"start it with `rounds run --scenarios FILE --assistant SPEC --run-id {run_id}`")
    interrupted = state.ended.get("interrupted", 0)
    if interrupted or state.open:
        return (f"run {run_id!r} was interrupted ({state.started} sessions started: "
                f"{state.started - interrupted - state.open} ended, {interrupted} interrupted, "
                f"{state.open} never ended); resume it with the scenario file it ran, keeping what ended: "
                f"`{resume}` (it is scored when it ends)")
    return (f"run {run_id!r} ended ({state.started} sessions) but was not scored; score it with "
            f"`rounds score --run {run_id}`")


def load_run_state(bus: Bus, run_id: str) -> RunState:
    """The run's sessions from the process's log (`bus`, ROUNDS_BUS); an empty state when there is none."""
    from sqlalchemy.exc import OperationalError, ProgrammingError

    from events.archive import read_log
    from events.bus import UnknownTopic
    from events.topics import SESSIONS

    try:
        return run_state((r.event for r in read_log(bus, [SESSIONS])), run_id)
    except (UnknownTopic, OperationalError, ProgrammingError):
        return RunState()
