"""The batch fast paths: executemany helpers (both paramstyles, any column order) and the collector pause."""

from __future__ import annotations

import gc

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, select

from events.projections.projection import bound_values, bulk_insert, bulk_update, in_bound
from events.projections.tracking import ProcessedEvent, processed_ids
from foundation.db import make_engine
from foundation.gcpause import gc_paused
from rounds.migrate import upgrade


@pytest.fixture
def table_and_engine(database_url: str):
    metadata = MetaData()
    table = Table(
        "t_batch",
        metadata,
        Column("a", String(20), primary_key=True),
        Column("b", Integer, primary_key=True),
        Column("c", String(20)),
        Column("d", Integer),
    )
    engine = create_engine(database_url)
    metadata.create_all(engine)
    yield table, engine
    engine.dispose()


def _rows(engine, table) -> list[tuple]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(select(table).order_by(table.c.a, table.c.b))]


def test_bulk_insert_writes_dicts_and_tuples_in_any_column_order(table_and_engine) -> None:
    table, engine = table_and_engine
    with engine.begin() as conn:
        dicts = [{"d": 1, "c": "x", "b": 2, "a": "k"}, {"a": "a", "b": 9, "c": None, "d": None}]
        bulk_insert(conn, table, dicts)
        bulk_insert(conn, table, [(5, "z", 1, "m"), (6, "y", 0, "m")], columns=("d", "c", "b", "a"))
        bulk_insert(conn, table, [("n", 1, "w", 7)], columns=("a", "b", "c", "d"))
        bulk_insert(conn, table, [])
    assert _rows(engine, table) == [
        ("a", 9, None, None), ("k", 2, "x", 1), ("m", 0, "y", 6), ("m", 1, "z", 5), ("n", 1, "w", 7),
    ]


def test_bulk_update_matches_on_the_key_and_leaves_other_rows(table_and_engine) -> None:
    table, engine = table_and_engine
    with engine.begin() as conn:
        bulk_insert(conn, table, [("k", 1, "old", 1), ("k", 2, "old", 2), ("j", 1, "keep", 3)],
                    columns=("a", "b", "c", "d"))
        changes = [{"a": "k", "b": 2, "c": "new", "d": 20}, {"d": 10, "c": "one", "b": 1, "a": "k"}]
        bulk_update(conn, table, changes, key=("a", "b"))
        bulk_update(conn, table, [], key=("a", "b"))
        bulk_update(conn, table, [{"a": "k", "b": 1}], key=("a", "b"))  # nothing to set: no statement
    assert _rows(engine, table) == [("j", 1, "keep", 3), ("k", 1, "one", 10), ("k", 2, "new", 20)]


def test_compiled_bulk_statements_are_reused_per_table_shape_and_dialect(table_and_engine) -> None:
    """The compiled-statement memo: a second batch of the same shape reuses the statement; another column
    set, another table of the same name (a fresh projection) or an UPDATE gets its own."""
    from events import sql_ops as projection  # the memo lives beside bulk_insert

    table, engine = table_and_engine
    twin = Table("t_batch", MetaData(), *(Column(c.name, c.type, primary_key=c.primary_key) for c in table.c))
    with engine.begin() as conn:
        bulk_insert(conn, table, [("p", 1, "x", 1)], columns=("a", "b", "c", "d"))
        size = len(projection._COMPILED)
        bulk_insert(conn, table, [("p", 2, "y", 2)], columns=("a", "b", "c", "d"))
        assert len(projection._COMPILED) == size
        bulk_insert(conn, table, [("p", 3, "z")], columns=("a", "b", "c"))
        bulk_insert(conn, twin, [("p", 4, "w", 4)], columns=("a", "b", "c", "d"))
        bulk_update(conn, table, [{"a": "p", "b": 1, "c": "u"}], key=("a", "b"))
        bulk_update(conn, table, [{"a": "p", "b": 2, "d": 9}], key=("a", "b"))
        assert len(projection._COMPILED) == size + 4
    assert _rows(engine, table) == [("p", 1, "u", 1), ("p", 2, "y", 9), ("p", 3, "z", None), ("p", 4, "w", 4)]


def test_gc_pause_nests_and_restores_the_collector_even_on_errors() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # only the outermost block re-enables
    assert gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # a collector the caller turned off stays off
    finally:
        gc.enable()


def test_processed_ids_equals_the_in_list_form(database_url: str) -> None:
    """The one-parameter lookup (json_each / = ANY) finds exactly what `event_id IN (...)` finds."""
    upgrade(database_url)
    engine = make_engine(database_url)
    table = ProcessedEvent.__table__
    odd = ["e-1", "quote'\"id", "ünï-cødé", "comma,bracket]", "back\\slash", "x" * 200]
    stored = [("g1", event_id, "/src") for event_id in odd[:4]]
    stored += [("g1", "e-1", "/other"), ("g2", "e-9", "/src")]
    with engine.begin() as conn:
        bulk_insert(conn, table, stored, columns=("group_id", "event_id", "source"))
    asked = [*odd, "e-9", "never"]
    with engine.connect() as conn:
        found = processed_ids(conn, "g1", asked)
        expected = {
            (source, event_id)
            for source, event_id in conn.execute(
                select(table.c.source, table.c.event_id).where(
                    table.c.group_id == "g1", table.c.event_id.in_(asked)
                )
            )
        }
        assert found == expected == {("/src", i) for i in odd[:4]} | {("/other", "e-1")}
        assert processed_ids(conn, "g2", asked) == {("/src", "e-9")}
        assert processed_ids(conn, "g1", []) == set() and processed_ids(conn, "g3", asked) == set()
    engine.dispose()


def test_in_bound_matches_integers_and_strings_like_in(table_and_engine) -> None:
    table, engine = table_and_engine
    with engine.begin() as conn:
        bulk_insert(conn, table, [("k1", 1, "x", 0), ("k2", 2, "y", 0), ("k'3", 3, None, 0)], columns="abcd")
    with engine.connect() as conn:
        dialect = conn.dialect.name
        for column, values in ((table.c.b, [1, 3, 99]), (table.c.a, ["k'3", "k2", "none"])):
            statement = select(table.c.a).where(in_bound(column, dialect, "v")).order_by(table.c.a)
            found = conn.execute(statement, {"v": bound_values(dialect, values)}).scalars().all()
            expected = conn.execute(select(table.c.a).where(column.in_(values)).order_by(table.c.a))
            assert found == expected.scalars().all() and len(found) == 2
