"""Where a scenario command reads the record: a FHIR base URL, or Rounds' own app over a database; and the
one way both commands run their reads on it. Shared by `rounds scenarios build` (cli.py) and `rounds
scenarios import` (fhir_agentbench/cli.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import typer

T = TypeVar("T")


def source_of(fhir_base: str | None, database_url: str | None) -> tuple[Any, Any]:
    """(the FHIR server to read, the store to dispose of after or None): a base URL, or Rounds' own app over
    a database (default: ROUNDS_DATABASE_URL)."""
    if fhir_base:
        return fhir_base, None
    from rounds.settings import settings_for
    from services.fhir_api.app import create_app

    app = create_app(settings_for(database_url))
    return app, app.state.store


def on_record(fhir_base: str | None, database_url: str | None, work: Callable[[Any], Awaitable[T]],
              errors: tuple[type[Exception], ...], suffix: str = "") -> T:
    """`work(source)` on the record, its store disposed of after; one of `errors` is printed (with `suffix`)
    and exits 1."""
    if fhir_base and database_url:
        raise typer.BadParameter("give --fhir-base or --database-url, not both")
    source, store = source_of(fhir_base, database_url)
    try:
        return asyncio.run(work(source))
    except errors as exc:
        typer.echo(f"error: {exc}{suffix}", err=True)
        raise typer.Exit(1) from exc
    finally:
        if store is not None:
            store.engine.dispose()
