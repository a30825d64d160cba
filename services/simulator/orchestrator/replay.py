"""`rounds replay --run RUN [--session ID] --assistant SPEC`: recorded sessions again, another assistant.

Counterfactual replay from the log alone: each recorded `rounds.session.started` holds the scenario line
itself, its trial, language and variant, so the same sessions run again at the same clocks in fresh sandboxes,
as a new run whose `session.started` says `replayOf` (the original run) and whose `causationid` is the
original session's started event.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from contracts.scenario import Scenario
from events.bus import Bus
from services.simulator.orchestrator.jobs import canonical_digest, recorded_sessions
from services.simulator.orchestrator.session_loop import SessionJob
from services.simulator.orchestrator.summary import AfterRun, print_summary


def replay_jobs(bus: Bus, run_id: str, session: str | None = None) -> tuple[list[SessionJob], dict[str, str]]:
    """The jobs of the run's recorded sessions (one per job key) and, per job key, the original started id."""
    jobs, causation = [], {}
    for recorded in recorded_sessions(bus, run_id).values():
        if session is not None and recorded.session_id != session:
            continue
        key = "|".join(map(str, recorded.key))
        if key in causation or not recorded.definition:
            continue
        scenario_id, trial, language, variant = recorded.key
        line = recorded.definition
        jobs.append(SessionJob(Scenario.model_validate(line), line, canonical_digest(line), trial, language,
                               variant))
        causation[key] = recorded.started_id
    return jobs, causation


def register_replay(app: typer.Typer, after_run: AfterRun | None = None) -> None:
    @app.command("replay")
    def replay_cmd(
        ctx: typer.Context,
        run: Annotated[str, typer.Option(help="the recorded run to replay")],
        assistant: Annotated[str, typer.Option(help="the assistant to replay it against")],
        session: Annotated[str | None, typer.Option(help="only this recorded session")] = None,
        run_id: Annotated[str | None, typer.Option(help="id of the new run (default: a fresh one)")] = None,
        concurrency: Annotated[int, typer.Option(min=1)] = 8,
        fhir_base: Annotated[str | None, typer.Option(help="a separate `rounds serve`")] = None,
        score: Annotated[bool, typer.Option("--score/--no-score", help="score the new run")] = True,
    ) -> None:
        """Replay a run's sessions (same scenarios, clocks, trials, languages) against another assistant."""
        from rounds.wiring import wiring
        from services.simulator.orchestrator.entry import RunOptions, run_scenarios
        from services.simulator.orchestrator.jobs import new_run_id

        wired = wiring(ctx).upgrade()
        jobs, causation = replay_jobs(wired.bus(ensure_topics=True), run, session)
        if not jobs:
            typer.echo(f"run {run} has no recorded session" + (f" {session}" if session else ""), err=True)
            raise typer.Exit(1)
        new_id = run_id or new_run_id()
        typer.echo(f"run {new_id}: replaying {len(jobs)} sessions of {run}")
        options = RunOptions(new_id, concurrency, fhir_base, replay_of=run, causation=causation)
        summary = asyncio.run(run_scenarios(jobs, assistant, options, wired))
        typer.echo(f"run id: {new_id}")
        # scored now, so `rounds report --compare` can read the scores
        print_summary(summary, after_run, wired, score=score, fhir_base=fhir_base)
