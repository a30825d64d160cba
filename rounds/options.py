"""Command-line options several `rounds` commands share, declared once so their flag, help and default
agree everywhere (`database_url: DatabaseUrl = None`, then `wiring(ctx, database_url)` in the command).

Ground floor: only Typer, so a command module can use them without loading anything of the project.
"""

from __future__ import annotations

from typing import Annotated

import typer

DatabaseUrl = Annotated[str | None, typer.Option(
    "--database-url", help="SQLAlchemy URL of Rounds' database (default: ROUNDS_DATABASE_URL)",
    show_default=False)]

ServerRoot = Annotated[str | None, typer.Option(
    "--base-url", help="this FHIR server's root as other programs reach it (default: ROUNDS_BASE_URL, else "
    "http://127.0.0.1:8080)", show_default=False)]

ShardSpec = Annotated[str | None, typer.Option(
    "--shard", help="i/n: only the patients of shard i of n (a stable hash of the patient, the same in "
    "every stage: rounds/shards.py), so n machines can each run one shard; default: every patient",
    show_default=False)]


def parse_shard(text: str | None):
    """The `--shard` value as a rounds.shards.Shard (a bad value is a usage error naming the option)."""
    from rounds.shards import parse

    try:
        return parse(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--shard") from None
