"""The transcript's rows, column by column, for every kind of entry applied in ONE batch (each kind writes
only its own columns; the others must read back NULL), and `ProjectionTx` rows of different column sets."""

from __future__ import annotations

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, select

from events.bus import Record
from events.catalog import CATALOG
from events.payloads import (
    EhrRequest,
    EhrResponse,
    SessionEnded,
    SessionStarted,
    ToolCall,
    ToolResult,
    communication,
)
from events.projections.projection import ProjectionTx
from events.projections.transcript import TranscriptProjection

SID = "s-rows"
T = "2026-11-30T10:00:00Z"


def _events() -> list:
    make = CATALOG.make
    kw = {"source": "/tests/rows", "subject": SID, "time": T}
    return [
        make("rounds.session.started", SessionStarted(assistant="llm"), id="e1", sequence=1, **kw),
        make("rounds.message.doctor", communication("m1", "doctor", ["assistant"], "hello"), id="e2",
             sequence=2, **kw),
        make("rounds.ehr.request", EhrRequest(request_id="r1", method="GET", url="Observation"), id="e3",
             sequence=3, **kw),
        make("rounds.ehr.response", EhrResponse(request_id="r1", status=200, latency_ms=4.5), id="e4", **kw),
        make("rounds.tool.call", ToolCall(call_id="c1", name="search"), id="e5", sequence=5, **kw),
        make("rounds.tool.result", ToolResult(call_id="c1", name="search", output={"n": 1}), id="e6",
             sequence=6, **kw),
        make("rounds.tool.result", ToolResult(call_id="c2", name="search", error="boom", latency_ms=2.0),
             id="e7", sequence=7, **kw),
        make("rounds.session.ended", SessionEnded(reason="completed", turns=1), id="e8", sequence=8, **kw),
    ]


# (position, event_id, event_type, event_time, sequence, role, ref, text, method, url, status, latency, name)
EXPECTED = [
    (1, "e1", "rounds.session.started", T, 1, "system", None, None, None, None, None, None, None),
    (2, "e2", "rounds.message.doctor", T, 2, "doctor", "m1", "hello", None, None, None, None, None),
    (3, "e3", "rounds.ehr.request", T, 3, "assistant", "r1", None, "GET", "Observation", None, None, None),
    (4, "e4", "rounds.ehr.response", T, None, "ehr", "r1", None, None, None, 200, 4.5, None),
    (5, "e5", "rounds.tool.call", T, 5, "assistant", "c1", None, None, None, None, None, "search"),
    (6, "e6", "rounds.tool.result", T, 6, "tool", "c1", None, None, None, None, None, "search"),
    (7, "e7", "rounds.tool.result", T, 7, "tool", "c2", "boom", None, None, None, 2.0, "search"),
    (8, "e8", "rounds.session.ended", T, 8, "system", None, "completed", None, None, None, None, None),
]


def test_every_entry_kind_in_one_batch_reads_back_column_by_column(database_url: str) -> None:
    projection = TranscriptProjection(suffix="rows")
    engine = create_engine(database_url)
    projection.create_tables(engine)
    records = [Record("t", 0, n, SID, e, e.to_bytes(), 0) for n, e in enumerate(_events())]
    with engine.begin() as conn:
        tx = ProjectionTx(conn, projection.tables)
        projection.prepare(tx, records)
        for record in records:
            projection.handle(tx, record)
        projection.finish(tx)
        tx.flush()
    entries, sessions = projection.tables["transcript_entries"], projection.tables["transcript_sessions"]
    with engine.connect() as conn:
        rows = [tuple(r) for r in conn.execute(select(entries).order_by(entries.c.position))]
        session = conn.execute(select(sessions)).mappings().one()
    engine.dispose()
    assert [row[0] for row in rows] == [SID] * len(EXPECTED)
    assert [row[1:] for row in rows] == EXPECTED
    assert (session["status"], session["entry_count"], session["message_count"], session["tool_call_count"],
            session["last_sequence"]) == ("ended", 8, 1, 1, 8)


@pytest.fixture
def table_and_engine(database_url: str):
    metadata = MetaData()
    table = Table("t_tx_rows", metadata, Column("a", String(20), primary_key=True), Column("b", Integer),
                  Column("c", String(20)))
    engine = create_engine(database_url)
    metadata.create_all(engine)
    yield table, engine
    engine.dispose()


def test_rows_of_different_column_sets_in_one_flush(table_and_engine) -> None:
    table, engine = table_and_engine
    with engine.begin() as conn:
        tx = ProjectionTx(conn, {"x": table})
        tx.insert("x", {"a": "k1", "b": 1})
        tx.insert("x", {"c": "z", "a": "k2"})
        tx.insert("x", {"a": "k3", "b": None, "c": None})
        tx.insert("x", {"b": 4, "a": "k4"})
        tx.flush()
        tx.flush()  # nothing queued any more: writes nothing twice
    with engine.connect() as conn:
        rows = [tuple(r) for r in conn.execute(select(table).order_by(table.c.a))]
    assert rows == [("k1", 1, None), ("k2", None, "z"), ("k3", None, None), ("k4", 4, None)]



@pytest.mark.parametrize("backend", ["sql-sqlite", "kafka"])
def test_a_batch_is_read_and_applied_with_the_collector_paused_and_an_idle_poll_waits_with_it_on(
    backend: str, request: pytest.FixtureRequest, sqlite_url: str
) -> None:
    """Re-enabled between reading and applying, the collector walked the whole live batch once per batch."""
    import gc

    from events.projections.runner import ProjectionRunner
    from tests.events.projections.helpers import close_env, make_env, publish_sessions

    bootstrap = request.getfixturevalue("kafka_bootstrap") if backend == "kafka" else None
    env = make_env(backend, sqlite_url, bootstrap, partitions=1)
    seen: dict[str, list[bool]] = {"poll": [], "handle": []}

    class Watching(TranscriptProjection):
        def handle(self, tx, record) -> None:
            seen["handle"].append(gc.isenabled())
            super().handle(tx, record)

    runner = ProjectionRunner(env.bus, env.engine, Watching(topics=env.topics),  # a fetch brings > 1 batch
                              deadletter_topic=env.deadletter, poll_timeout_s=0.2, batch_size=5)
    try:
        with runner:
            consumer = runner.consumer
            poll = consumer.poll

            def watched(timeout_s: float = 1.0, max_records: int = 500):
                records = poll(timeout_s=timeout_s, max_records=max_records)
                seen["poll"].append((timeout_s, gc.isenabled(), len(records)))
                return records

            consumer.poll = watched
            while not runner.consumer.assignment():  # joined, nothing to read yet: idle polls wait
                runner.poll_once()
            assert gc.isenabled()
            streams = publish_sessions(env, count=3, turns=2)
            total = sum(len(s) for s in streams.values())
            stats = runner.run(until_caught_up=True, timeout_s=120)
    finally:
        close_env(env)
    assert stats.applied == total and gc.isenabled()
    assert seen["handle"] == [False] * total  # applied with the collector paused
    # every poll that returned records without waiting ran paused; every waiting poll ran with it on
    assert all(not enabled for timeout, enabled, _ in seen["poll"] if timeout == 0)
    assert all(enabled for timeout, enabled, _ in seen["poll"] if timeout > 0)
    assert any(timeout == 0 and count for timeout, _, count in seen["poll"])
