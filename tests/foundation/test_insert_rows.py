"""`insert_rows` stores what SQLAlchemy's Core insert of the same rows stores, value for value and type for
type (datetimes, booleans, bytes, floats, NULLs through the columns' bind processors), on SQLite's driver
path; a row of the wrong length is refused by the driver."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import insert

from foundation.db import insert_rows, make_engine
from services.fhir_api.store import models as m

WHEN = datetime(2026, 12, 7, 23, 5, 16, 123456, tzinfo=UTC)
VERSIONS = [
    (1, "", "Patient", "p1", 1, WHEN, "PUT", False, b'{"resourceType":"Patient","id":"p1"}'),
    (2, "s1", "Observation", "o1", 2, WHEN, "DELETE", True, None),
]
NUMBERS = [(1, 7, 2.5, None, None), (2, 7, 3, 10, 20)]  # an int into a Float column: stored as a REAL


def _stored(database: Path) -> list[list[tuple]]:
    conn = sqlite3.connect(database)
    try:
        return [[tuple((type(v).__name__, v) for v in row)
                 for row in conn.execute(f"SELECT * FROM {name} ORDER BY rowid")]
                for name in (m.version.name, m.number.name)]
    finally:
        conn.close()


def _write(database: Path, fast: bool) -> list[list[tuple]]:
    engine = make_engine(f"sqlite:///{database}")
    m.meta.create_all(engine, tables=[m.version, m.number])
    with engine.begin() as conn:
        for table, rows in ((m.version, VERSIONS), (m.number, NUMBERS)):
            if fast:
                insert_rows(conn, table, rows)
            else:
                names = [c.name for c in table.columns]
                conn.execute(insert(table), [dict(zip(names, row, strict=True)) for row in rows])
        insert_rows(conn, m.number, [])  # nothing to insert: no statement
    engine.dispose()
    return _stored(database)


def test_the_driver_path_stores_what_the_core_insert_stores(tmp_path: Path) -> None:
    fast, core = _write(tmp_path / "fast.sqlite", True), _write(tmp_path / "core.sqlite", False)
    assert fast == core
    assert fast[0][0][5] == ("str", "2026-12-07 23:05:16.123456") and fast[0][1][7] == ("int", 1)
    assert fast[1][1][2] == ("float", 3.0)


def test_a_row_of_the_wrong_length_is_refused(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'x.sqlite'}")
    m.meta.create_all(engine, tables=[m.number])
    with pytest.raises(Exception, match="bindings"), engine.begin() as conn:
        insert_rows(conn, m.number, [(1, 7, 2.5)])
    engine.dispose()
