"""The solver: one Inspect sample runs one Rounds session, through Rounds' own session loop.

`run_session` (services/simulator/orchestrator/session.py) does what it does for `rounds run`: opens the
sandbox at the scenario's clock, records `rounds.session.started` (run id = the Inspect eval id, trial = the
epoch - 1), plays the physician's turns and the patient agent, records every message and call, decides who a
failure is charged to and records `rounds.session.ended`. The assistant is the sample's model
(assistant.py). Afterwards:

- a session Rounds does not charge to the assistant (infrastructure, patient) is a sample error for Inspect
  (`RoundsSessionError`; `--retry-on-error` runs the sample again in a fresh sandbox), never a score;
- a session an Inspect limit ended re-raises that limit, so Inspect records it and still scores the sample;
- a cancellation (Inspect's time or working-time limit, an operator's stop) ends the session on the log
  first, with the reason limits.py gives, shielded from the cancellation, then goes on.

What the scorer needs to find the session again is in `state.metadata["rounds"]` (kept in the Inspect log).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import anyio
from inspect_ai.log._samples import sample_active
from inspect_ai.model import get_model
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.util import sample_limits

from events.payloads import SessionEnded
from rounds.inspect.assistant import InspectAssistant
from rounds.inspect.dataset import load_jobs, selection
from rounds.inspect.limits import RoundsSessionError, cut_reason, not_charged
from rounds.inspect.runs import RUNS, RoundsRun
from rounds.settings import Settings
from services.simulator.orchestrator.session import SessionJob, SessionSettings, run_session


class _Opened:
    """The run's environment as one session sees it: the same server, noting the session id it opens (a
    cancelled session has to be ended by id)."""

    def __init__(self, env: Any) -> None:
        self._env, self.session_id = env, None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    async def open_session(self, now):
        self.session_id, base = await self._env.open_session(now)
        return self.session_id, base


def inspect_ids() -> tuple[str, str | None]:
    """The running sample's Inspect eval id and Inspect run id."""
    active = sample_active()
    if active is None:
        raise RuntimeError("the Rounds solver runs inside an Inspect sample only")
    return active.eval_id, active.run_id


@solver
def rounds_session(scenarios: str | None = None, language: str = "en", variant: str = "implicit",
                   families: str | None = None, limit: int | None = None, fhir_base: str | None = None,
                   max_steps: int = 8, turn_timeout: float = 120.0, run_id: str | None = None) -> Solver:
    """The sessions of the scenario file as the task chose them (its arguments, recorded in the log)."""
    jobs: dict[str, SessionJob] = load_jobs(selection(scenarios, language, variant, families, limit))
    settings = Settings().model_copy(update={"fhir_base": fhir_base} if fhir_base else {})

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        job = replace(jobs[str(state.sample_id)], trial=state.epoch - 1)
        eval_id, inspect_run = inspect_ids()
        run = await RUNS.get(eval_id, run_id or eval_id, settings, fhir_base, inspect_run)
        run.sessions += 1
        assistant = InspectAssistant(get_model(), state)
        env = _Opened(run.env)
        options = SessionSettings(run_id=run.run_id, assistant_spec=assistant.spec, max_steps=max_steps,
                                  turn_timeout_s=turn_timeout,
                                  on_cancel=lambda: cut_reason(sample_active(), _limits()))
        started = time.monotonic()
        try:
            outcome = await run_session(env, run.log, assistant, job, options)  # type: ignore[arg-type]
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await _end_cut(run, env.session_id, state, started)
            raise
        _record(state, run, outcome.session_id, outcome.reason, outcome.error, outcome.turns,
                trial=job.trial, assistant=assistant.spec)
        if not_charged(outcome.reason):
            raise RoundsSessionError(outcome.reason, outcome.error, outcome.session_id)
        if assistant.limit is not None:
            raise assistant.limit
        return state

    return solve


async def _end_cut(run: RoundsRun, session_id: str | None, state: TaskState, started: float) -> None:
    """End a session the sample's cancellation cut short: what it queued, then `rounds.session.ended`."""
    if session_id is None:
        return
    live = run.env.sessions.pop(session_id, None)
    turns = max(live.turn, 0) if live is not None else 0
    if live is not None:
        live.closed = True
    reason, detail = cut_reason(sample_active(), _limits())
    run.log.emit(session_id, "rounds.session.ended", SessionEnded(
        reason=reason, turns=turns, duration_ms=(time.monotonic() - started) * 1000, error=detail,
        run_id=run.run_id))
    await run.log.flush(session_id)
    run.log.forget(session_id)
    _record(state, run, session_id, reason, detail, turns)


def _record(state: TaskState, run: RoundsRun, session_id: str | None, reason: str, error: str | None,
            turns: int, **more: Any) -> None:
    """Where the scorer (and a reader of the Inspect log) finds the session on Rounds' log."""
    state.metadata["rounds"] = {"run": run.run_id, "eval": run.eval_id, "session": session_id,
                                "reason": reason, "error": error, "turns": turns, **more}


def _limits():
    try:
        return sample_limits()
    except RuntimeError:
        return None
