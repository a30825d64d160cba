"""Command-line options several `rounds` commands share, declared once so their flag, help and default
agree everywhere (`database_url: DatabaseUrl = None`, then `settings_for(database_url)` in the command).

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
