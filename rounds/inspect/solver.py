"""The solver: one Inspect sample runs one Rounds session, through Rounds' own session loop.

`run_session` (services/simulator/orchestrator/session_loop.py) does what it does for `rounds run`: opens the
sandbox at the scenario's clock, records `rounds.session.started` (run id = the Inspect eval id, trial = the
epoch - 1), plays the physician's turns and the patient agent, records every message and call, decides who a
failure is charged to and records `rounds.session.ended`. The assistant is the sample's model
(assistant.py). Afterwards:

- a session Rounds does not charge to the assistant (infrastructure, patient) is a sample error for Inspect
  (`RoundsSessionError`; `--retry-on-error` runs the sample again in a fresh sandbox), never a score;
- a session an Inspect limit ended re-raises that limit, so Inspect records it and still scores the sample;
- a cancellation (Inspect's time or working-time limit, an operator's stop) ends the session on the log
  (`run_session` records the end shielded, with the reason limits.py gives: `SessionSettings.on_cancel`),
  then goes on to Inspect.

What the scorer needs to find the session again is in `state.metadata["rounds"]` (kept in the Inspect log).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import anyio
from inspect_ai.log._samples import sample_active
from inspect_ai.model import get_model
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.util import sample_limits

from rounds.inspect.assistant import InspectAssistant
from rounds.inspect.dataset import load_jobs, selection
from rounds.inspect.limits import RoundsSessionError, cut_reason, not_charged
from rounds.inspect.runs import RUNS, RoundsRun
from rounds.settings import Settings
from services.simulator.orchestrator.session_loop import SessionJob, SessionSettings, run_session


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
        options = SessionSettings(run_id=run.run_id, assistant_spec=assistant.spec, max_steps=max_steps,
                                  turn_timeout_s=turn_timeout,
                                  on_cancel=lambda: cut_reason(sample_active(), _limits()))
        outcome = await run_session(run.env, run.log, assistant, job, options)
        _record(state, run, outcome.session_id, outcome.reason, outcome.error, outcome.turns,
                trial=job.trial, assistant=assistant.spec)
        await anyio.lowlevel.checkpoint()  # a cancellation the session ended on goes on to Inspect
        if not_charged(outcome.reason):
            raise RoundsSessionError(outcome.reason, outcome.error, outcome.session_id)
        if assistant.limit is not None:
            raise assistant.limit
        return state

    return solve


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
