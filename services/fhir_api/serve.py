"""`rounds serve`: the FHIR API under uvicorn."""

from __future__ import annotations

from typing import Annotated

import typer

from rounds.options import DatabaseUrl


def serve(
    ctx: typer.Context,
    database_url: DatabaseUrl = None,
    host: Annotated[str, typer.Option(help="interface to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8080,
    base_url: Annotated[str | None, typer.Option(help="externally visible base URL for links")] = None,
    trusted_proxies: Annotated[
        str | None,
        typer.Option(help="IPs/CIDRs of proxies whose Forwarded/X-Forwarded-* headers set the links"),
    ] = None,
    migrate: Annotated[bool, typer.Option("--migrate/--no-migrate", help="upgrade the schema first")] = True,
    workers: Annotated[int, typer.Option(help="uvicorn worker processes")] = 1,
    threads: Annotated[
        int | None, typer.Option(help="store operations at once per worker (default: connection pool size)")
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(help="requests in progress at once per worker, the rest queue; 0: no limit (default 2)"),
    ] = None,
    max_body_bytes: Annotated[
        int | None, typer.Option(min=1, help="largest request body accepted (default ROUNDS_MAX_BODY_BYTES)")
    ] = None,
) -> None:
    """Serve the FHIR R4 API (/fhir, /sessions, /docs)."""
    import os

    import uvicorn

    from rounds.wiring import wiring
    from services.fhir_api.http.protocol import uvicorn_options

    # Workers are separate processes: hand them the configuration through the environment.
    if database_url:
        os.environ["ROUNDS_DATABASE_URL"] = database_url
    if base_url:
        os.environ["ROUNDS_BASE_URL"] = base_url
    if trusted_proxies:
        os.environ["ROUNDS_TRUSTED_PROXIES"] = trusted_proxies
    if max_body_bytes:
        os.environ["ROUNDS_MAX_BODY_BYTES"] = str(max_body_bytes)
    if threads:
        os.environ["ROUNDS_API_THREADS"] = str(threads)
    if concurrency is not None:
        os.environ["ROUNDS_API_CONCURRENCY"] = str(concurrency)
    if migrate:
        wiring(ctx, database_url).upgrade()
    uvicorn.run(
        "rounds.root:served_app",  # the root of each worker process
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level="warning",
        access_log=False,
        # uvicorn would rewrite the scheme and client address from X-Forwarded-* sent from 127.0.0.1 (its
        # default FORWARDED_ALLOW_IPS); the app honours them from ROUNDS_TRUSTED_PROXIES only (forwarded.py)
        proxy_headers=False,
        **uvicorn_options(),  # over-long URLs and heads answered with OperationOutcomes (http/protocol.py)
    )


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
