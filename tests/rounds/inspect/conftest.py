"""The Inspect task's fixtures: the simulator's hand-written record loaded into a fresh SQLite store that
ROUNDS_DATABASE_URL points at (the task's embedded default), its scenario file, and the working directory
(Inspect's logs) in the test's folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from rounds.settings import Settings
from services.simulator.orchestrator.jobs import read_scenarios
from tests.fixture_record import load_record
from tests.simulator.conftest import SCENARIOS


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


@pytest.fixture(scope="session")
def demo_scenarios(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """What `rounds demo` makes before its runs, small: 3 synthetic patients synthesized, mapped and loaded
    into a store, and the scenario builder's sessions over it (the same stages, the same components)."""
    import asyncio

    from fhir_mapper.pipeline import run_map
    from fhir_mapper.synth.generate import generate
    from rounds.migrate import upgrade
    from services.simulator.scenarios import build_async, output
    from tests.wiring import app_on, load_on

    work = tmp_path_factory.mktemp("inspect-demo")
    url = f"sqlite:///{work / 'rounds.sqlite'}"
    generate(work / "mimic", 3, 7)
    run_map(work / "mimic", work / "fhir")
    upgrade(url)
    load_on(url, work / "fhir", workers=1)
    app = app_on(Settings(database_url=url))
    try:
        build = asyncio.run(build_async(app, 7, 4, None, 1))
    finally:
        app.state.store.engine.dispose()
    scenarios = work / "rounds-demo" / "scenarios.jsonl"
    output.write(scenarios, build.scenarios, build.summary)
    return url, scenarios
