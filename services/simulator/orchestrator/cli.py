"""`rounds run` (and `rounds replay`): sessions of a scenario file against an assistant, with progress per
turn and a one-screen summary of the sessions by end reason. What follows the summary (model calls, scores)
is the caller's `after_run`: the composition root (rounds/run_command.py) passes the consumers' report, so
the simulator never imports them.

Exit codes: 0 the run ended (whatever the assistant did), 1 sessions ended for Rounds' or the endpoint's
reasons (`infrastructure_error`, `patient_error`: rerun them with `--retry-failed`), 2 bad input (scenario
file, assistant spec, a rerun with other options), 3 the assistant's endpoint failed its pre-flight, 130
interrupted (Ctrl-C: the open sessions ended `interrupted`; the printed command resumes the run)."""

from __future__ import annotations

import asyncio
import shlex
import signal
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Annotated, Any

import typer

from contracts.end_reasons import NOT_ASSISTANT_FAULT
from contracts.languages import LANGUAGE_CHOICES
from services.simulator.orchestrator.jobs import RunSummary
from services.simulator.orchestrator.summary import AfterRun, print_summary


def rerun_command(run_id: str, *extra: str) -> str:
    """The command line that reruns this run: the one given, with its run id (and `extra` flags)."""
    args = [a for a in sys.argv[1:] if a not in extra]
    if not any(a == "--run-id" or a.startswith("--run-id=") for a in args):
        args += ["--run-id", run_id]
    return shlex.join(["rounds", *args, *extra])


def run_interruptibly(main: Coroutine[Any, Any, RunSummary]) -> RunSummary:
    """Run `main` on a fresh loop; the first Ctrl-C cancels it (the run records the open sessions' ends and
    returns its summary), a second one is Python's default (stop now)."""
    loop = asyncio.new_event_loop()
    task = loop.create_task(main)

    def stop() -> None:
        typer.echo("\ninterrupted: ending the open sessions (Ctrl-C again to quit at once)", err=True)
        loop.remove_signal_handler(signal.SIGINT)
        task.cancel()

    loop.add_signal_handler(signal.SIGINT, stop)
    try:
        return loop.run_until_complete(task)
    finally:
        loop.close()


def exit_status(summary: RunSummary) -> int:
    """130 when interrupted, 1 when sessions failed for Rounds' or the endpoint's reasons, else 0 (what the
    assistant did wrong is a result, not a failure of the run)."""
    if summary.interrupted:
        hint = rerun_command(summary.run_id)
        typer.echo(f"run {summary.run_id} was interrupted; resume it with:\n  {hint}", err=True)
        return 130
    failed = sum(n for reason, n in summary.by_reason.items() if reason in NOT_ASSISTANT_FAULT)
    if failed:
        typer.echo(f"{failed} sessions ended for Rounds' or the model endpoint's reasons (not scored); "
                   f"rerun them with:\n  {rerun_command(summary.run_id, '--retry-failed')}", err=True)
        return 1
    return 0


def register_run(app: typer.Typer, after_run: AfterRun | None = None) -> None:
    """Add `rounds run` and `rounds replay` to `app`; `after_run` reports a run once it ended."""

    @app.command("run")
    def run_cmd(
        ctx: typer.Context,
        scenarios: Annotated[Path, typer.Option(exists=True, dir_okay=False, help="scenario JSONL file")],
        assistant: Annotated[str, typer.Option(help="baseline | oracle | weak | python:mod:fn | http:URL | "
                                                    "openai:MODEL[@BASE] | mcp:...")],
        trials: Annotated[int, typer.Option(min=1, help="sessions per scenario and language (pass^k)")] = 1,
        concurrency: Annotated[int | None, typer.Option(
            min=1, help="sessions at once (default: 8; 1 for an openai: model on this machine or a private "
                        "network)")] = None,
        language: Annotated[str, typer.Option(help="en | zh | both")] = "en",
        variant: Annotated[str, typer.Option(help="implicit | explicit physician phrasing")] = "implicit",
        run_id: Annotated[str | None, typer.Option(help="resume this run (skips ended sessions)")] = None,
        limit: Annotated[int | None, typer.Option(min=1, help="only the first N scenarios")] = None,
        fhir_base: Annotated[str | None, typer.Option(help="a separate `rounds serve` (default: in-process)")]
        = None,
        turn_timeout: Annotated[float | None, typer.Option(
            min=0.001, help="seconds an assistant has per turn (default: 120; 600 for a local model)")
        ] = None,
        max_tokens: Annotated[int | None, typer.Option(
            min=1, help="max_tokens sent with every model call (default: 1024; 512 for a local model)")
        ] = None,
        model_timeout: Annotated[float | None, typer.Option(
            min=0.001, help="seconds one model call may take; past it the request is closed and the turn "
                            "ends `timeout` (default: 60; 300 for a local model)")] = None,
        max_steps: Annotated[int, typer.Option(min=1, help="tool steps per turn")] = 8,
        seed: Annotated[int, typer.Option()] = 0,
        retry_failed: Annotated[bool, typer.Option(
            "--retry-failed", help="with --run-id: also rerun sessions that ended in timeout, "
                                   "infrastructure_error or patient_error (interrupted ones always "
                                   "are)")] = False,
        accept_changed_options: Annotated[bool, typer.Option(
            "--accept-changed-options", help="with --run-id: continue the run with options other than the "
                                             "ones it recorded")] = False,
        any_model_name: Annotated[bool, typer.Option(
            "--any-model-name", help="openai: the server routes model names itself (a gateway): run a model "
                                     "its /v1/models does not list")] = False,
        score: Annotated[bool, typer.Option("--score/--no-score", help="score the run when it ends")] = True,
        patient_voice: Annotated[str | None, typer.Option(
            help="openai:<model>[@<base_url>]: an LLM rephrases the patient's replies (verified, else the "
                 "deterministic words)")] = None,
    ) -> None:
        """Run sessions between the physician and patient agents and an assistant; every message an event."""
        from rounds.wiring import wiring
        from services.simulator.assistant_protocol import EndpointUnavailable
        from services.simulator.assistants.registry import create_assistant
        from services.simulator.orchestrator.entry import RunOptions, run_scenarios
        from services.simulator.orchestrator.jobs import RunOptionsChanged, new_run_id, plan, read_scenarios
        from services.simulator.orchestrator.progress import RunProgress

        if language not in LANGUAGE_CHOICES or variant not in ("implicit", "explicit"):
            raise typer.BadParameter("--language en|zh|both, --variant implicit|explicit")
        try:
            lines = read_scenarios(scenarios, limit)
            chosen = create_assistant(assistant, wiring(ctx).settings.openai_api_key)
            voice = None
            if patient_voice:
                from services.simulator.agents.voice import create_voice

                voice = create_voice(patient_voice)
        except ValueError as exc:  # a bad line (file:line) or an unknown / malformed assistant spec
            typer.echo(f"rounds run: {exc}", err=True)
            raise typer.Exit(2) from None
        wired = wiring(ctx).upgrade()  # the SQL log, the sequence counters: in its database
        jobs = plan(lines, trials, LANGUAGE_CHOICES[language], variant)
        resume = run_id is not None  # a fresh run id has nothing to resume: the log is not scanned
        run_id = run_id or new_run_id()
        typer.echo(f"run {run_id}: {len(jobs)} sessions ({len(lines)} scenarios)")
        with RunProgress(jobs) as progress:
            options = RunOptions(run_id, concurrency, fhir_base, turn_timeout, max_steps, seed, resume=resume,
                                 voice=voice, max_tokens=max_tokens, model_timeout_s=model_timeout,
                                 retry_failed=retry_failed, accept_changed_options=accept_changed_options,
                                 any_model_name=any_model_name, on_turn=progress.turn)
            try:
                summary = run_interruptibly(run_scenarios(jobs, chosen, options, wired,
                                                          progress=progress.session))
            except EndpointUnavailable as exc:
                progress.stop()
                typer.echo(f"rounds run: {exc}", err=True)
                raise typer.Exit(3) from None
            except RunOptionsChanged as exc:
                progress.stop()
                typer.echo(f"rounds run: {exc}", err=True)
                raise typer.Exit(2) from None
        typer.echo(f"run id: {run_id}" + (f" ({summary.endpoint})" if summary.endpoint else ""))
        print_summary(summary, after_run, wired, score=score and not summary.interrupted, fhir_base=fhir_base)
        status = exit_status(summary)
        if status:
            raise typer.Exit(status)

    from services.simulator.orchestrator.replay import register_replay

    register_replay(app, after_run)
