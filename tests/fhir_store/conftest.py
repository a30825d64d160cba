"""A migrated store on each backend (SQLite file and a fresh PostgreSQL database)."""

from __future__ import annotations

import pytest

from rounds.migrate import upgrade
from services.fhir_api.store import open_store
from services.fhir_api.store.sql_store import SqlResourceStore


@pytest.fixture
def store(database_url: str) -> SqlResourceStore:
    upgrade(database_url)
    s = open_store(database_url)
    yield s
    s.engine.dispose()
