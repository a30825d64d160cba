"""`rounds events project|replay|relay`: run a projection consumer, rebuild a projection, relay the outbox.

The `rounds events` group (events/cli.py) calls `register_subcommands(events_app)`; each command runs on its
process's bus and engine, handed by the root (rounds/wiring.py).
"""

from __future__ import annotations

import json
import signal
import threading

import typer

from events.topics import DEADLETTER
from rounds.options import DatabaseUrl
from rounds.wiring import wiring


def _open(ctx: typer.Context, database_url: str | None):
    """The process's bus and engine, once the consumer tables are known to be there."""
    from sqlalchemy import inspect

    wired = wiring(ctx, database_url)
    engine = wired.engine()
    if not inspect(engine).has_table("event_consumer_positions"):
        typer.echo(f"the consumer tables are missing in {wired.settings.database_url.split('@')[-1]}: "
                   "run `rounds db upgrade`", err=True)
        raise typer.Exit(2)
    return wired.bus(), engine


def _projection(name: str):
    from events.projections.replay import PROJECTIONS

    if name not in PROJECTIONS:
        raise typer.BadParameter(f"unknown projection {name!r}; known: {', '.join(sorted(PROJECTIONS))}")
    return PROJECTIONS[name]


def serve(runner, *, until_caught_up: bool = False, idle_exit_s: float | None = None):
    """Run a consumer service until SIGTERM/SIGINT (which finish the batch in progress) or the given end."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: runner.request_stop())
    with runner:
        return runner.run(until_caught_up=until_caught_up, idle_exit_s=idle_exit_s)


def project(
    ctx: typer.Context,
    name: str = typer.Argument("transcript", help="projection to run"),
    group: str | None = typer.Option(None, help="consumer group (default projection.<name>)"),
    batch_size: int = typer.Option(500, min=1, max=100_000),
    until_caught_up: bool = typer.Option(False, help="stop once the end offsets seen at start are applied"),
    idle_exit: float | None = typer.Option(None, help="stop after this many seconds without records"),
    topic: list[str] | None = typer.Option(None, help="read these topics instead of the projection's own"),
    deadletter_topic: str = typer.Option(DEADLETTER, help="where poison events go"),
    database_url: DatabaseUrl = None,
) -> None:
    """Run a projection consumer (exactly-once into the database); SIGTERM/SIGINT finish the batch, stop."""
    bus, engine = _open(ctx, database_url)
    projection = _projection(name)(topics=tuple(topic) if topic else None)
    from events.projections.runner import ProjectionRunner

    runner = ProjectionRunner(bus, engine, projection, group_id=group, batch_size=batch_size,
                              deadletter_topic=deadletter_topic)
    stats = serve(runner, until_caught_up=until_caught_up, idle_exit_s=idle_exit)
    typer.echo(json.dumps({"group": runner.group_id, **vars(stats)}))


def replay_command(
    ctx: typer.Context,
    name: str = typer.Argument("transcript", help="projection to rebuild"),
    session: str | None = typer.Option(None, help="only this session's events (records keyed by it)"),
    suffix: str | None = typer.Option(None, help="table name suffix (default: r<timestamp>_<random>)"),
    database_url: DatabaseUrl = None,
) -> None:
    """Rebuild a projection from the beginning into fresh tables; prints the tables and figures."""
    projection = _projection(name)
    if suffix is not None and not suffix.replace("_", "").isalnum():
        raise typer.BadParameter(f"suffix must be letters, digits and '_', got {suffix!r}")
    bus, engine = _open(ctx, database_url)
    from events.projections.replay import replay

    result = replay(bus, engine, projection, session_id=session, suffix=suffix)
    typer.echo(json.dumps({"suffix": result.suffix, "group": result.group_id, "tables": result.tables,
                           "seconds": round(result.seconds, 3), **vars(result.stats)}))


def relay_command(
    ctx: typer.Context,
    once: bool = typer.Option(False, help="publish what is pending, then exit"),
    interval: float = typer.Option(0.2, help="seconds between polls of the outbox"),
    database_url: DatabaseUrl = None,
) -> None:
    """Publish the FHIR outbox to rounds.fhir-changes (marks rows sent after the broker acknowledges)."""
    from events.relay import Relay

    bus, engine = _open(ctx, database_url)
    relay = Relay(engine, bus)
    if once:
        typer.echo(json.dumps({"published": relay.drain()}))
        return
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    relay.run(stop, interval)


def register_subcommands(events_app: typer.Typer) -> None:
    events_app.command("project")(project)
    events_app.command("replay")(replay_command)
    events_app.command("relay")(relay_command)
