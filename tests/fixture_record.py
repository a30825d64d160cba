"""The simulator's hand-written fixture record (tests/simulator/fixtures/record.json): loading it into a
store, and a migrated SQLite copy of it made once per worker that each test copies instead of
migrating and PUTting the record. Used by the simulator's and the scorer's tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "simulator" / "fixtures"


def load_record(database_url: str) -> None:
    """Migrate and PUT the fixture record into the shared /fhir record (fixed ids the scenarios name)."""
    from fastapi.testclient import TestClient

    from rounds.migrate import upgrade
    from rounds.settings import Settings
    from tests.wiring import app_on

    upgrade(database_url)
    app = app_on(Settings(database_url=database_url))
    with TestClient(app) as client:
        for resource in json.loads((FIXTURES / "record.json").read_text()):
            response = client.put(f"/fhir/{resource['resourceType']}/{resource['id']}", json=resource)
            assert response.status_code in (200, 201), response.text


@pytest.fixture(scope="session")
def record_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite store holding the fixture record, made once per worker."""
    from foundation.db import checkpoint

    path = tmp_path_factory.mktemp("record-template") / "record.sqlite"
    load_record(f"sqlite:///{path}")
    checkpoint(path)
    return path


@pytest.fixture
def record_url(sqlite_url: str, record_template: Path) -> str:
    """A fresh SQLite store of this test's own holding the fixture record."""
    shutil.copyfile(record_template, sqlite_url.removeprefix("sqlite:///"))
    return sqlite_url
