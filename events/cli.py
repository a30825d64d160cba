"""`rounds events dump|load|topics` (and the subcommands other event modules contribute)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Annotated

import typer
from sqlalchemy import Engine

from events.bus import Bus
from events.topics import ALL_TOPICS, topic_specs
from rounds.wiring import Wiring, wiring

events_app = typer.Typer(
    name="events", help="The event log: topics, export and import.", no_args_is_help=True
)

# Modules exposing `register_subcommands(events_app: typer.Typer) -> None` (relay, replay): one line each
# (tests/foundation/test_registrations.py checks the list is complete).
SUBCOMMAND_MODULES: list[str] = ["events.projections.cli"]


def _bus(ctx: typer.Context, ensure: bool = False) -> tuple[Bus, Wiring]:
    """The process's bus (its root's), the SQL log's tables checked first."""
    wired = wiring(ctx)
    if wired.settings.bus == "sql":
        _require_schema(wired)
    return wired.bus(ensure_topics=ensure), wired


def _require_schema(wired: Wiring) -> None:
    from sqlalchemy import inspect

    if not inspect(wired.engine()).has_table("event_log_partition"):
        url = wired.settings.database_url
        typer.echo(
            f"the event log tables are missing in {url.split('@')[-1]}: run `rounds db upgrade`", err=True
        )
        raise typer.Exit(2)


def _blob_engine(wired: Wiring) -> Engine | None:
    """The engine of the blob store (the application database, whichever the bus), or None when that is a
    SQLite file that does not exist (a Kafka-only set-up without one: nothing stored, nothing to carry)."""
    from sqlalchemy.engine import make_url

    url = make_url(wired.settings.database_url)
    if url.get_backend_name() == "sqlite" and url.database and not Path(url.database).exists():
        return None
    return wired.engine()


@events_app.command("topics")
def topics_cmd(ctx: typer.Context) -> None:
    """Create the Rounds topics if missing (ROUNDS_KAFKA_PARTITIONS partitions each) and list them."""
    bus, wired = _bus(ctx, ensure=True)
    settings = wired.settings
    for spec in topic_specs(settings.kafka_partitions):
        typer.echo(f"{spec.name}\t{len(bus.partitions(spec.name))} partitions\t{settings.bus}")


@events_app.command("dump")
def dump_cmd(
    ctx: typer.Context,
    session: Annotated[str | None, typer.Option(help="only this session's events")] = None,
    topic: Annotated[list[str] | None, typer.Option(help="topic to read (repeatable; default: all)")] = None,
    from_beginning: Annotated[
        bool, typer.Option("--from-beginning", help="start at offset 0, not the end")
    ] = False,
    follow: Annotated[bool, typer.Option("--follow", help="keep printing new events")] = False,
    idle_timeout: Annotated[
        float | None, typer.Option(help="with --follow: stop after this many idle s")
    ] = None,
) -> None:
    """Print events as JSON lines (one CloudEvent per line) without joining a consumer group, each preceded
    by the stored blobs it names (blob lines), so `load` elsewhere resolves them."""
    from events.archive import SESSION_TOPICS, dump

    topics = topic or (list(SESSION_TOPICS) if session else list(ALL_TOPICS))
    if not from_beginning and not follow:
        typer.echo(
            "nothing to print: add --from-beginning (the log so far) and/or --follow (new events)", err=True
        )
    bus, wired = _bus(ctx)
    written, skipped = dump(
        bus,
        topics,
        sys.stdout.buffer,
        blobs=_blob_engine(wired),
        session=session,
        from_beginning=from_beginning,
        follow=follow,
        idle_timeout_s=idle_timeout,
    )
    typer.echo(f"{written} events" + (f", {skipped} invalid records skipped" if skipped else ""), err=True)


@events_app.command("load")
def load_cmd(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="JSON lines from `rounds events dump` ('-' = stdin)")],
) -> None:
    """Re-publish an exported log to the topics its events route to; events already present are skipped;
    the blobs it carries are stored in the application database (ROUNDS_DATABASE_URL)."""
    from events.archive import load

    bus, wired = _bus(ctx, ensure=True)
    engine = _blob_engine(wired)
    if str(file) == "-":
        report = load(bus, sys.stdin.buffer, blobs=engine)
    else:
        with file.open("rb") as lines:
            report = load(bus, lines, blobs=engine)
    for problem in report.rejected:
        typer.echo(f"rejected {problem}", err=True)
    typer.echo(
        f"{report.published} published, {report.already_present} already present, "
        f"{len(report.rejected)} rejected" + (f", {report.blobs} blobs stored" if report.blobs else ""),
        err=True,
    )
    if report.rejected:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register_subcommands(events_app)
    app.add_typer(events_app, name="events")
