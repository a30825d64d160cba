"""Alembic, run by the composition root alone: `upgrade` (called by rounds/root.py `Root.upgrade`, which
`rounds db upgrade` and the commands that need the schema at head call; the tests' fixtures call it too) and
`run_environment`, the body of alembic's migrations/env.py (its URL, engine and the registry's metadata)."""

from __future__ import annotations

import atexit
import importlib
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import MetaData, pool
from sqlalchemy.engine import make_url

from foundation.db import checkpoint, make_engine

REPO_ROOT = Path(__file__).resolve().parent.parent
# Modules that declare tables on foundation.db.Base.metadata; alembic and the schema tests import them all
# (tests/foundation/test_registrations.py fails until the list is complete).
MODEL_MODULES: list[str] = [
    "rounds.models",
    "services.fhir_api.store.models",
    "events.sql_models",
    "events.projections.tracking", "events.outbox", "events.sequences", "events.blobs",
    "events.projections.models", "services.consumers.scoring.models",
    "services.fhir_api.auth.models", "services.fhir_api.subscriptions.models",
]
_TEMPLATE_LOCK = threading.Lock()
_template: Path | None = None


def alembic_config(database_url: str) -> Config:
    cfg = Config(str(REPO_ROOT / "alembic.ini"))
    cfg.set_main_option("script_location", str(REPO_ROOT / "migrations"))
    # '%' must be escaped for configparser interpolation.
    cfg.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return cfg


def upgrade(database_url: str, revision: str = "head") -> None:
    """Bring the schema at `database_url` to `revision` (the single head by default).

    A SQLite file that does not exist yet, brought to head, is a copy of a database this process migrated
    once: the same migrations made it, so the same schema and alembic version, without replaying every
    revision (~0.15 s a database; a test run and `rounds demo` make hundreds)."""
    target = _new_sqlite_file(database_url) if revision == "head" else None
    if target is None:
        command.upgrade(alembic_config(database_url), revision)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_head_template(), target)


def _new_sqlite_file(database_url: str) -> Path | None:
    """The path of a plain SQLite file URL whose file does not exist (or is empty), else None."""
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite" or url.query or url.database in (None, "", ":memory:"):
        return None
    path = Path(url.database)
    if path.exists() and path.stat().st_size > 0:
        return None
    if any(path.with_name(path.name + suffix).exists() for suffix in ("-wal", "-journal")):
        return None
    return path


def _head_template() -> Path:
    """A SQLite database migrated to head by alembic, made on first use and removed at exit."""
    global _template
    with _TEMPLATE_LOCK:
        if _template is None or not _template.exists():
            folder = Path(tempfile.mkdtemp(prefix="rounds-schema-"))
            atexit.register(shutil.rmtree, folder, True)
            path = folder / "head.sqlite"
            command.upgrade(alembic_config(f"sqlite:///{path}"), "head")
            checkpoint(path)  # the file alone is copied
            _template = path
        return _template


def run_environment(context: Any) -> None:
    """What alembic's migrations/env.py does: run the migrations on the connection `upgrade` handed over
    (config.attributes["connection"]), else on an engine of the configured URL (ROUNDS_DATABASE_URL when
    alembic is typed without one), with every component's tables as the target metadata."""
    from logging.config import fileConfig

    from rounds.settings import Settings

    config = context.config
    if config.config_file_name is not None and not config.attributes.get("skip_logging"):
        fileConfig(config.config_file_name, disable_existing_loggers=False)
    target_metadata = load_all_models()
    url = config.get_main_option("sqlalchemy.url") or Settings().database_url
    if context.is_offline_mode():
        context.configure(url=url, target_metadata=target_metadata, literal_binds=True, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    connection = config.attributes.get("connection")
    if connection is not None:
        _migrate_on(context, connection, target_metadata)
        return
    engine = make_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            _migrate_on(context, connection, target_metadata)
    finally:
        engine.dispose()


def _migrate_on(context: Any, connection: Any, target_metadata: Any) -> None:
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def load_all_models() -> MetaData:
    """Import every model module so Base.metadata is complete (alembic autogenerate and the schema tests
    compare it with the migrations)."""
    from foundation.db import Base

    for name in MODEL_MODULES:
        importlib.import_module(name)
    return Base.metadata
