"""rounds/ is the only composition root: it reads the settings, makes the engines and migrates; every other
module is handed them. One process, one engine per database: the FHIR store, the event log and the backbone
share its pool."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import typer
from sqlalchemy import inspect
from typer.testing import CliRunner

from rounds.root import Root, served_app
from rounds.settings import Settings
from rounds.wiring import wiring

REPO = Path(__file__).resolve().parents[2]
COMPONENTS = ("contracts", "events", "services", "fhir_mapper", "migrations")
WIRING_CALLS = {"make_engine", "get_settings", "Settings", "BackboneSettings"}


def _calls(path: Path) -> list[str]:
    """`name()` calls of the wiring functions, and imports of the migration runner, in one module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name in WIRING_CALLS:
                found.append(f"{name}()")
        elif isinstance(node, ast.ImportFrom) and node.module == "rounds.migrate" \
                and path.name != "env.py":  # alembic's own script hands over to the runner
            found.append("rounds.migrate")
    return found


def test_no_component_reads_settings_makes_an_engine_or_migrates() -> None:
    wired_itself = {str(path.relative_to(REPO)): calls
                    for top in COMPONENTS for path in (REPO / top).rglob("*.py") if (calls := _calls(path))}
    assert wired_itself == {}


def test_one_engine_per_database_shared_by_every_view_of_the_root(tmp_path: Path) -> None:
    root = Root(Settings(database_url=f"sqlite:///{tmp_path / 'a.sqlite'}", bus="sql"))
    engine = root.engine()
    assert root.engine() is engine and root.on(root.settings.database_url).engine() is engine
    other = root.on(f"sqlite:///{tmp_path / 'b.sqlite'}")
    assert other.engine() is not engine and other.settings.database_url.endswith("b.sqlite")
    assert root.upgrade().bus(ensure_topics=True).engine is engine  # the SQL log on the root's engine
    assert inspect(engine).has_table("event_log_partition")
    root.close()
    assert root._made.engines == {} and root._made.buses == {}


def test_a_served_worker_opens_one_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store, the event backbone (outbox relay, recorder) and access control share the worker's engine."""
    url = f"sqlite:///{tmp_path / 'served.sqlite'}"
    Root(Settings(database_url=url)).upgrade()
    for name, value in (("ROUNDS_DATABASE_URL", url), ("ROUNDS_BUS", "sql"), ("ROUNDS_AUTH", "on"),
                        ("ROUNDS_AUTH_KEY", "k" * 32), ("ROUNDS_OUTBOX_RELAY", "off")):
        monkeypatch.setenv(name, value)
    app = served_app()
    try:
        engine = app.state.store.engine
        assert app.state.event_backbone.engine is engine and app.state.event_backbone.bus.engine is engine
        assert app.state.auth.revocations.engine is engine
    finally:
        app.state.event_backbone.close()
        engine.dispose()


def test_a_command_outside_the_rounds_group_has_no_wiring() -> None:
    loose = typer.Typer()

    @loose.command()
    def orphan(ctx: typer.Context) -> None:
        wiring(ctx)

    result = CliRunner().invoke(loose, [])
    assert isinstance(result.exception, RuntimeError) and "rounds` group" in str(result.exception)


def test_rounds_db_upgrade_migrates_through_the_root(tmp_path: Path) -> None:
    from rounds.cli import app

    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    result = CliRunner().invoke(app, ["db", "upgrade", "--database-url", url])
    assert result.exit_code == 0, result.output
    assert "schema at head" in result.output
    engine = Root(Settings(database_url=url)).engine()
    assert inspect(engine).has_table("fhir_resource") and inspect(engine).has_table("event_outbox")
    engine.dispose()
