"""Where a scenario command reads the record: a FHIR base URL, or Rounds' own app over a database. Shared
by `rounds scenarios build` (cli.py) and `rounds scenarios import` (fhir_agentbench/cli.py)."""

from __future__ import annotations

from typing import Any


def source_of(fhir_base: str | None, database_url: str | None) -> tuple[Any, Any]:
    """(the FHIR server to read, the store to dispose of after or None): a base URL, or Rounds' own app over
    a database (default: ROUNDS_DATABASE_URL)."""
    if fhir_base:
        return fhir_base, None
    from rounds.settings import settings_for
    from services.fhir_api.app import create_app

    app = create_app(settings_for(database_url))
    return app, app.state.store
