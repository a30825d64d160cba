"""`upgrade` makes a new SQLite database at head by copying one it migrated: the copy must be what alembic
would have made, and a database that exists (at an older revision) must still be migrated step by step."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from alembic import command
from sqlalchemy import create_engine, inspect

from rounds.migrate import alembic_config, upgrade


def _schema(path: Path) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        return sorted(conn.execute("SELECT type, name, sql FROM sqlite_master").fetchall())


def _version(path: Path) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT version_num FROM alembic_version").fetchall()


def test_a_new_file_at_head_equals_what_alembic_makes(tmp_path: Path) -> None:
    command.upgrade(alembic_config(f"sqlite:///{tmp_path / 'alembic.sqlite'}"), "head")
    upgrade(f"sqlite:///{tmp_path / 'a' / 'copy.sqlite'}")  # a folder that does not exist yet, too
    upgrade(f"sqlite:///{tmp_path / 'second.sqlite'}")
    expected = _schema(tmp_path / "alembic.sqlite")
    assert len(expected) > 20
    assert _schema(tmp_path / "a" / "copy.sqlite") == expected == _schema(tmp_path / "second.sqlite")
    assert _version(tmp_path / "a" / "copy.sqlite") == _version(tmp_path / "alembic.sqlite")
    # the copies are independent databases
    with sqlite3.connect(tmp_path / "second.sqlite") as conn:
        conn.execute("CREATE TABLE only_here (x INTEGER)")
    copy = create_engine(f"sqlite:///{tmp_path / 'a' / 'copy.sqlite'}")
    assert "only_here" not in inspect(copy).get_table_names()
    copy.dispose()


def test_an_existing_database_is_migrated_not_replaced(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    command.upgrade(alembic_config(f"sqlite:///{path}"), "0003_event_log")
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE kept (x INTEGER)")
        conn.execute("INSERT INTO kept VALUES (7)")
    upgrade(f"sqlite:///{path}")
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT x FROM kept").fetchall() == [(7,)]
    assert _version(path) == _version_of_head(tmp_path)


def _version_of_head(tmp_path: Path) -> list[tuple]:
    upgrade(f"sqlite:///{tmp_path / 'head.sqlite'}")
    return _version(tmp_path / "head.sqlite")


def test_other_targets_go_through_alembic(tmp_path: Path) -> None:
    path = tmp_path / "partial.sqlite"
    upgrade(f"sqlite:///{path}", "0003_event_log")
    assert _version(path) == [("0003_event_log",)]
