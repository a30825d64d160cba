"""`rounds hl7 listen`: the MLLP listener of one session (listener.py)."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from rounds.options import ServerRoot

hl7_app = typer.Typer(help="HL7 v2 over MLLP: a connector's ORU/ADT into a session.", no_args_is_help=True)


@hl7_app.command("listen")
def listen(
    ctx: typer.Context,
    session: Annotated[str, typer.Option(help="the session the connector's messages are written into")],
    port: Annotated[int, typer.Option(help="the MLLP port")] = 2575,
    host: Annotated[str, typer.Option(help="the interface to listen on")] = "127.0.0.1",
    base_url: ServerRoot = None,
    token: Annotated[str | None, typer.Option(envvar="ROUNDS_HL7_TOKEN", help="the session's access token "
                                              "(ROUNDS_AUTH=on)")] = None,
) -> None:
    """Accept ORU^R01 and ADT^A01/A02/A03/A04 on mllp://HOST:PORT into SESSION as FHIR writes through the
    session's base, and ACK each (AA, AE or AR with the reason). Runs until stopped."""
    from rounds.wiring import wiring
    from services.fhir_api.hl7.listener import Listener

    root = (base_url or wiring(ctx).settings.base_url or "http://127.0.0.1:8080").rstrip("/")
    listener = Listener(f"{root}/sessions/{session}/fhir", token=token)

    async def main() -> None:
        server = await listener.serve(host, port)
        typer.echo(f"listening on mllp://{host}:{port} for session {session}")
        try:
            async with server:
                await server.serve_forever()
        finally:
            await listener.aclose()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        typer.echo(f"acknowledged: {listener.acks}")


def register(app: typer.Typer) -> None:
    app.add_typer(hl7_app, name="hl7")
