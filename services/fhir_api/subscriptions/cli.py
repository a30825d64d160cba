"""`rounds subscriptions deliver` (the delivering consumer) and `rounds feed` (replay a stay as a feed)."""

from __future__ import annotations

from typing import Annotated

import typer

from rounds.options import DatabaseUrl, ServerRoot
from rounds.wiring import wiring

subscriptions_app = typer.Typer(help="FHIR Subscriptions fed by rounds.fhir-changes.", no_args_is_help=True)
Topic = Annotated[str, typer.Option(help="the change topic")]


@subscriptions_app.command("deliver")
def deliver(
    ctx: typer.Context,
    base_url: ServerRoot = None,
    group: Annotated[str, typer.Option(help="the consumer group")] = "rounds-subscriptions",
    idle_exit: Annotated[float | None, typer.Option(help="stop after this many idle seconds")] = None,
    topic: Topic = "rounds.fhir-changes",
    ws_port: Annotated[int | None, typer.Option(help="serve websocket channels on this port (ws://host:P/ws)")]
    = None,
    ws_host: Annotated[str, typer.Option(help="the websocket's interface")] = "127.0.0.1",
    database_url: DatabaseUrl = None,
) -> None:
    """Notify Subscriptions of the changes on rounds.fhir-changes (runs until stopped)."""
    from services.fhir_api.store import open_store
    from services.fhir_api.subscriptions.delivery import Delivery
    from services.fhir_api.subscriptions.websocket import WebSocketHub

    wired = wiring(ctx, database_url).upgrade()
    settings = wired.settings
    bus = wired.bus(ensure_topics=True)
    root = base_url or settings.base_url or "http://127.0.0.1:8080"
    store = open_store(wired.engine())
    hub = WebSocketHub(_binder(settings, store)) if ws_port is not None else None
    if hub is not None:
        hub.serve(ws_host, ws_port)
    try:
        import httpx

        from services.fhir_api.subscriptions.endpoints import EndpointPolicy

        policy = EndpointPolicy.of(settings.subscription_endpoints, settings.subscription_headers)
        Delivery(store, bus, root, group=group, topic=topic, websockets=hub,
                 client=httpx.Client(timeout=settings.subscription_timeout_s), policy=policy,
                 retry_s=settings.subscription_retry_s).run(idle_exit_s=idle_exit)
    finally:
        if hub is not None:
            hub.stop()


def _binder(settings, store):
    """Under access control, a websocket binds a Subscription only with a live token of its base (signed,
    unexpired, not revoked: the revocation list the FHIR server's `/auth/revoke` writes)."""
    if not settings.auth:
        return None
    from services.fhir_api.auth.revocation import Revocations
    from services.fhir_api.auth.tokens import signing_key
    from services.fhir_api.subscriptions.endpoints import session_binder, token_base

    engine = store.engine
    base_of = token_base(signing_key(engine, settings.auth_key), Revocations(engine))
    return session_binder(store, base_of)


def feed(
    ctx: typer.Context,
    session: Annotated[str, typer.Option(help="the session whose clock moves")],
    start: Annotated[str, typer.Option("--from", help="the clock to start from (FHIR dateTime)")],
    end: Annotated[str, typer.Option("--to", help="the clock to stop at (FHIR dateTime)")],
    speed: Annotated[str, typer.Option(help="clinical time per real time, e.g. 60x")] = "60x",
    tick: Annotated[float, typer.Option(min=0.01, help="real seconds between clock moves")] = 0.5,
    type_: Annotated[list[str] | None, typer.Option("--type", help="also announce this type")] = None,
    patient: Annotated[str | None, typer.Option(help="narrow --type to this patient")] = None,
    topic: Topic = "rounds.fhir-changes",
    hl7: Annotated[str | None, typer.Option(help="send the --patient's stay as HL7 v2 to mllp://host:port")]
    = None,
    hl7_file: Annotated[str | None, typer.Option(help="append the --patient's stay as HL7 v2 to this file")]
    = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Advance SESSION's clock from --from to --to so what became known appears, in order, and is
    announced to the session's Subscriptions (through rounds.fhir-changes)."""
    from services.fhir_api.http.params import parse_instant
    from services.fhir_api.store import open_store
    from services.fhir_api.subscriptions.feed import FeedError, parse_speed
    from services.fhir_api.subscriptions.feed import feed as run_feed

    wired = wiring(ctx, database_url)
    try:
        window = parse_instant(start, "--from"), parse_instant(end, "--to")
        rate = parse_speed(speed)
    except Exception as exc:  # noqa: BLE001 - any bad value is the user's: say which
        raise typer.BadParameter(str(exc)) from exc
    store = open_store(wired.upgrade().engine())
    who = patient.removeprefix("Patient/") if patient else None
    try:
        taps = hl7_taps(store, session, who, hl7, hl7_file)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    bus = wired.bus(ensure_topics=True)
    try:
        report = run_feed(store, bus, session, *window, rate, tick_s=tick, types=type_ or [], patient=who,
                          topic=topic, taps=[tap for tap, _ in taps])
    except FeedError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from exc
    finally:
        for _, sink in taps:
            sink.close()
    typer.echo(f"{report.announced} resources became known over {report.ticks} clock moves")
    for tap, sink in taps:
        typer.echo(f"{tap.sent} HL7 v2 messages sent to {sink}")


def hl7_taps(store, session: str, patient: str | None, url: str | None, path: str | None) -> list:
    """(tap, sink) per HL7 v2 destination asked for; the stay is one patient's, so --patient is required."""
    if url is None and path is None:
        return []
    if patient is None:
        raise ValueError("--hl7 and --hl7-file send one patient's stay: give --patient")
    from pathlib import Path

    from services.fhir_api.hl7.mllp import FileSink, MllpSender
    from services.fhir_api.hl7.stay import Hl7Tap, StayReader

    sinks = ([MllpSender.of(url)] if url else []) + ([FileSink(Path(path))] if path else [])
    return [(Hl7Tap(StayReader(store, patient), session, sink.send), sink) for sink in sinks]


def register(app: typer.Typer) -> None:
    app.add_typer(subscriptions_app, name="subscriptions")
    app.command("feed")(feed)
