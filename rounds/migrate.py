"""Run alembic migrations programmatically (used by the CLI, the services and the tests)."""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import make_url

from foundation.db import checkpoint

REPO_ROOT = Path(__file__).resolve().parent.parent
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
