"""The Inspect task's fixtures: the simulator's hand-written record loaded into a fresh SQLite store that
ROUNDS_DATABASE_URL points at (the task's embedded default), its scenario file, and the working directory
(Inspect's logs) in the test's folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from rounds.settings import Settings
from services.simulator.orchestrator.run import read_scenarios
from tests.simulator.conftest import SCENARIOS, load_record


@pytest.fixture
def rounds_db(sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    load_record(sqlite_url)
    monkeypatch.setenv("ROUNDS_DATABASE_URL", sqlite_url)
    monkeypatch.setenv("ROUNDS_BUS", "sql")
    monkeypatch.delenv("ROUNDS_FHIR_BASE", raising=False)
    monkeypatch.setenv("INSPECT_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.chdir(tmp_path)
    return Settings(database_url=sqlite_url)


@pytest.fixture
def scenario_file() -> Path:
    return SCENARIOS


@pytest.fixture
def scenario_models():
    return [scenario for scenario, _ in read_scenarios(SCENARIOS)]
