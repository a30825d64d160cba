"""`rounds score` (re-score a run from the log) and `rounds consume scorer` (the long-lived scorer service).

`python -m services.consumers.scoring.cli consume scorer ...` runs the same commands standalone (the fault
tests start the service that way and SIGKILL it).
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from events.topics import DEADLETTER, SCORES
from rounds.options import DatabaseUrl
from rounds.wiring import Wiring, wiring

JUDGE = typer.Option(None, "--judge", help="optional LLM judge MODEL@BASE_URL (OpenAI-compatible; key in "
                     "ROUNDS_JUDGE_API_KEY); off by default")


def _judge(spec: str | None, api_key: str | None):
    if spec is None:
        return None
    from services.consumers.scoring.judge import LlmJudge

    try:
        return LlmJudge.from_spec(spec, api_key)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--judge") from None


def score_command(
    ctx: typer.Context,
    run: str = typer.Option(..., "--run", help="the run to score (rounds.session.started runId)"),
    scorer_version: str | None = typer.Option(None, "--scorer-version", help="label of these scores "
                                              "(default: the code's SCORER_VERSION); replaces that version"),
    scenarios: Path | None = typer.Option(None, "--scenarios", exists=True, dir_okay=False,
                                          help="fresh scenario definitions (JSONL) by scenario id"),
    topic: str | None = typer.Option(None, "--topic", help="read this sessions topic instead"),
    scores_topic: str = typer.Option(SCORES, "--scores-topic"),
    json_out: Path | None = typer.Option(None, "--json", help="also write the RunReport document here"),
    judge: str | None = JUDGE,
    workers: int | None = typer.Option(None, "--workers", min=1, help="members of the re-score's consumer "
                                       "group, those past the first in child processes (default: one per "
                                       "partition, up to the cores + 1, for a log large enough; 1 with "
                                       "--judge)"),
    group: str | None = typer.Option(None, "--group", help="name the re-score's consumer group (default: a "
                                     "fresh one), so members on other machines can join it with --join"),
    join: bool = typer.Option(False, "--join", help="only be a member of --group's re-score (apply the "
                              "partitions assigned here; the process started without --join reports)"),
    database_url: DatabaseUrl = None,
) -> None:
    """Re-score a run from the log with a fresh or named consumer group; prints the summary as JSON."""
    from services.consumers.scoring.api import score_run
    from services.consumers.scoring.scenarios import ScenarioFileError

    wired = wiring(ctx, database_url)
    if join:
        _join(wired, run, group, scorer_version, scenarios, topic, scores_topic)
        return
    try:
        _check_group(group)
        report = score_run(wired, run, scorer_version=scorer_version,
                           scenarios=scenarios, topics=(topic,) if topic else None, scores_topic=scores_topic,
                           judge=_judge(judge, wired.settings.judge_api_key), workers=1 if judge else workers,
                           group=group)
    except ScenarioFileError as exc:
        raise typer.BadParameter(str(exc), param_hint="--scenarios") from None
    if json_out is not None:
        json_out.write_text(report.model_dump_json(indent=1), encoding="utf-8")
    m = report.metrics
    typer.echo(json.dumps({"run": run, "scorer_version": report.scorer_version, "sessions": m.sessions,
                           "excluded_sessions": m.excluded_sessions, "turns": m.turns, "avg": m.avg,
                           "pass_at_session": m.pass_at_session, "pass_hat_k": m.pass_hat_k}))
    if not report.sessions:
        typer.echo(f"rounds score: no ended session of run {run!r} in the log", err=True)
        raise typer.Exit(1)


def _check_group(group: str | None) -> str | None:
    from services.consumers.scoring.members import group_suffix

    try:
        return group_suffix(group) if group else None
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--group") from None


def _join(wired: Wiring, run: str, group: str | None, scorer_version: str | None, scenarios: Path | None,
          topic: str | None, scores_topic: str) -> None:
    """A member of the named re-score group, until the group has applied the log."""
    from services.consumers.scoring import members
    from services.consumers.scoring.scorer import SCORER_VERSION

    if not group:
        raise typer.BadParameter("--join needs the --group to join", param_hint="--join")
    spec = members.MemberSpec(wired.settings, run, scorer_version or SCORER_VERSION, _check_group(group),
                              scenarios, (topic,) if topic else None, scores_topic,
                              engine_factory=wired.engine_factory)
    members.run_member(spec)
    typer.echo(json.dumps({"run": run, "group": group, "member": "done"}))


def consume_scorer(
    ctx: typer.Context,
    group: str = typer.Option("scorer", help="consumer group (its positions live in the database)"),
    scorer_version: str | None = typer.Option(None, "--scorer-version"),
    batch_size: int = typer.Option(200, min=1, max=100_000),
    until_caught_up: bool = typer.Option(False, help="stop once the end offsets seen at start are applied"),
    idle_exit: float | None = typer.Option(None, help="stop after this many seconds without records"),
    topic: list[str] | None = typer.Option(None, help="read these topics instead of rounds.sessions"),
    scores_topic: str = typer.Option(SCORES, "--scores-topic"),
    deadletter_topic: str = typer.Option(DEADLETTER, "--deadletter-topic"),
    judge: str | None = JUDGE,
    database_url: DatabaseUrl = None,
) -> None:
    """Run the scorer as a long-lived consumer group (scales by partitions); SIGTERM finishes the batch."""
    from events.projections.cli import serve
    from events.projections.runner import ProjectionRunner
    from services.consumers.scoring.api import make_projection
    from services.consumers.scoring.fhir_state import fhir_client
    from services.consumers.scoring.scorer import SCORER_VERSION

    wired = wiring(ctx, database_url)
    bus, engine = wired.bus(), wired.engine()
    client = fhir_client(wired.settings, engine)
    projection = make_projection(client, engine, topics=tuple(topic) if topic else None,
                                 scorer_version=scorer_version or SCORER_VERSION, scores_topic=scores_topic,
                                 judge=_judge(judge, wired.settings.judge_api_key))
    runner = ProjectionRunner(bus, engine, projection, group_id=group, batch_size=batch_size,
                              deadletter_topic=deadletter_topic)
    try:
        serve(runner, until_caught_up=until_caught_up, idle_exit_s=idle_exit)
    finally:
        runner.close()
        client.close()
    typer.echo(json.dumps({"group": runner.group_id, "scored": len(projection.scored), **vars(runner.stats)}))


def register(app: typer.Typer) -> None:
    app.command("score")(score_command)
    consume = typer.Typer(help="Run a consumer service (a consumer group on the event log).",
                          no_args_is_help=True)
    consume.command("scorer")(consume_scorer)
    app.add_typer(consume, name="consume")
