"""`rounds db ...`: schema management."""

from __future__ import annotations

import typer

from rounds.options import DatabaseUrl
from rounds.settings import settings_for


def register(app: typer.Typer) -> None:
    db = typer.Typer(help="Database schema management (alembic).", no_args_is_help=True)

    @db.command("upgrade")
    def upgrade_cmd(
        database_url: DatabaseUrl = None,
        revision: str = typer.Option("head", help="Target revision."),
    ) -> None:
        """Create or upgrade the schema."""
        from rounds.migrate import upgrade

        url = settings_for(database_url).database_url
        upgrade(url, revision)
        typer.echo(f"schema at {revision} on {url.split('@')[-1]}")

    app.add_typer(db, name="db")
