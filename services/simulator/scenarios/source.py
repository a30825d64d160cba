"""Where a scenario command reads the record: a FHIR base URL, or Rounds' own app over a database; and the
one way both commands run their reads on it. Shared by `rounds scenarios build` (cli.py) and `rounds
scenarios import` (fhir_agentbench/cli.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import typer

from rounds.wiring import Wiring, wiring

T = TypeVar("T")


def source_of(fhir_base: str | None, wired: Wiring) -> Any:
    """The FHIR server to read: a base URL, or Rounds' own app on the process's engine."""
    if fhir_base:
        return fhir_base
    from services.fhir_api.app import app_on_engine

    return app_on_engine(wired.settings, wired.engine())


def on_record(ctx: typer.Context, fhir_base: str | None, database_url: str | None,
              work: Callable[[Any], Awaitable[T]], errors: tuple[type[Exception], ...],
              suffix: str = "") -> T:
    """`work(source)` on the record (the root disposes of its engine when the command ends); one of `errors`
    is printed (with `suffix`) and exits 1."""
    if fhir_base and database_url:
        raise typer.BadParameter("give --fhir-base or --database-url, not both")
    source = source_of(fhir_base, wiring(ctx, database_url))
    try:
        return asyncio.run(work(source))
    except errors as exc:
        typer.echo(f"error: {exc}{suffix}", err=True)
        raise typer.Exit(1) from exc
