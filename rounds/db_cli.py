"""`rounds db ...`: schema management."""

from __future__ import annotations

import typer

from rounds.options import DatabaseUrl
from rounds.wiring import wiring


def register(app: typer.Typer) -> None:
    db = typer.Typer(help="Database schema management (alembic).", no_args_is_help=True)

    @db.command("upgrade")
    def upgrade_cmd(
        ctx: typer.Context,
        database_url: DatabaseUrl = None,
        revision: str = typer.Option("head", help="Target revision."),
    ) -> None:
        """Create or upgrade the schema."""
        url = wiring(ctx, database_url).upgrade(revision).settings.database_url
        typer.echo(f"schema at {revision} on {url.split('@')[-1]}")

    app.add_typer(db, name="db")
