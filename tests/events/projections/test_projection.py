"""The projection framework on every backend: order, exactly-once, dedupe, resume, replay, graceful stop."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from events.projections.runner import ProjectionRunner
from events.projections.tracking import ConsumerPosition
from events.projections.transcript import TranscriptProjection
from tests.events.projections.helpers import Env, publish_sessions, snapshot


def runner_for(env: Env, projection: TranscriptProjection | None = None, **kw) -> ProjectionRunner:
    projection = projection or TranscriptProjection(topics=env.topics)
    return ProjectionRunner(env.bus, env.engine, projection, deadletter_topic=env.deadletter,
                            poll_timeout_s=0.2, **kw)


def test_projection_is_ordered_per_session_with_counts(env: Env) -> None:
    streams = publish_sessions(env, count=4, turns=3)
    with runner_for(env) as runner:
        stats = runner.run(until_caught_up=True, timeout_s=120)
        projection = runner.projection
    total = sum(len(s) for s in streams.values())
    assert (stats.applied, stats.duplicates, stats.dead_lettered) == (total, 0, 0)
    rows = snapshot(env.engine, projection)
    for sid, events in streams.items():
        entries = [r for r in rows["transcript_entries"] if r[0] == sid]
        assert [e[2] for e in entries] == [e.id for e in events]  # log order == publish order
        assert [e[1] for e in entries] == list(range(1, len(events) + 1))
    sessions = {r[0]: r for r in rows["transcript_sessions"]}
    table = projection.tables["transcript_sessions"]
    with env.engine.connect() as conn:
        one = conn.execute(select(table).where(table.c.session_id == next(iter(streams)))).mappings().one()
    assert set(sessions) == set(streams)
    assert one["status"] == "ended" and one["entry_count"] == 3 * 4 + 2
    assert (one["message_count"], one["ehr_request_count"], one["ehr_response_count"]) == (6, 3, 3)
    assert one["last_sequence"] == 14
    # positions stored in the projection's database equal the log's end offsets
    with env.engine.connect() as conn:
        stored = {(t, p): o for t, p, o in conn.execute(
            select(ConsumerPosition.topic, ConsumerPosition.partition, ConsumerPosition.next_offset)
            .where(ConsumerPosition.group_id == runner.group_id))}
    ends = env.bus.reader([env.sessions]).end_offsets(env.bus.partitions(env.sessions))
    assert stored == {(tp.topic, tp.partition): end for tp, end in ends.items() if end > 0}


def test_duplicate_event_has_no_second_effect(env: Env) -> None:
    streams = publish_sessions(env, count=2, turns=1)
    sid, events = next(iter(streams.items()))
    env.bus.publish_many(env.sessions, [(sid, events[1]), (sid, events[2])])  # same source+id, new offsets
    with runner_for(env) as runner:
        stats = runner.run(until_caught_up=True, timeout_s=120)
        rows = snapshot(env.engine, runner.projection)
    assert stats.duplicates == 2
    assert len([r for r in rows["transcript_entries"] if r[0] == sid]) == len(events)


def test_restart_resumes_exactly_after_last_commit_and_replay_is_identical(env: Env) -> None:
    publish_sessions(env, count=3, turns=2)
    first = runner_for(env, batch_size=7)
    with first:
        while first.stats.applied < 14:  # stop part-way: some batches committed, the rest not read
            first.poll_once()
    applied_before = first.stats.applied
    publish_sessions(env, count=2, turns=2)  # more arrives while it is down
    second = runner_for(env, batch_size=7)
    with second:
        second.run(until_caught_up=True, timeout_s=120)
    assert applied_before + second.stats.applied == 5 * 10  # nothing lost, nothing applied twice
    assert second.stats.duplicates == 0
    live = snapshot(env.engine, second.projection)

    from events.projections.replay import replay

    result = replay(env.bus, env.engine, TranscriptProjection, topics=env.topics, timeout_s=120)
    rebuilt = TranscriptProjection(suffix=result.suffix, topics=env.topics)
    assert result.tables == [rebuilt.table_name(t) for t in ("transcript_sessions", "transcript_entries")]
    assert snapshot(env.engine, rebuilt) == live
    assert result.stats.applied == 50


def test_replay_of_one_session_builds_only_that_session(env: Env) -> None:
    streams = publish_sessions(env, count=3, turns=1)
    with runner_for(env) as runner:
        runner.run(until_caught_up=True, timeout_s=120)
        live = snapshot(env.engine, runner.projection)
    from events.projections.replay import replay

    sid = list(streams)[1]
    result = replay(env.bus, env.engine, "transcript", session_id=sid, topics=env.topics, timeout_s=120)
    rebuilt = snapshot(env.engine, TranscriptProjection(suffix=result.suffix, topics=env.topics))
    assert rebuilt == {name: [r for r in rows if r[0] == sid] for name, rows in live.items()}
    assert result.stats.applied == len(streams[sid])


def test_graceful_stop_finishes_the_batch(env: Env) -> None:
    publish_sessions(env, count=3, turns=2)

    class StopAfterFirstBatch(TranscriptProjection):
        def finish(self, tx) -> None:
            super().finish(tx)
            runner.request_stop()  # as a SIGTERM handler would, mid-batch

    runner = runner_for(env, StopAfterFirstBatch(topics=env.topics), batch_size=5)
    with runner:
        stats = runner.run(timeout_s=60)
        rows = snapshot(env.engine, runner.projection)
    assert stats.batches == 1 and stats.applied == 5  # the batch in progress was finished and committed
    assert len(rows["transcript_entries"]) == 5
    with env.engine.connect() as conn:
        committed = sum(o for (o,) in conn.execute(
            select(ConsumerPosition.next_offset).where(ConsumerPosition.group_id == runner.group_id)))
    assert committed == 5


def test_bad_projection_suffix_is_rejected() -> None:
    with pytest.raises(ValueError, match="suffix"):
        TranscriptProjection(suffix="x; DROP TABLE y")


def test_fenced_position_drops_a_zombie_batch(sqlite_url: str) -> None:
    """A member whose partition moved on without it (its stored position changed underneath) must not apply
    its in-flight batch: the fenced update fails, the batch rolls back, it re-seeks to the stored position."""
    from sqlalchemy import update

    from tests.events.projections.helpers import close_env, make_env

    env = make_env("sql-sqlite", sqlite_url, partitions=1)
    try:
        publish_sessions(env, count=1, turns=5)  # 22 events on one partition
        runner = runner_for(env, batch_size=4)
        with runner:
            runner.poll_once()
            assert runner.stats.applied == 4
            with env.engine.begin() as conn:  # another member applied 4..9 and moved the position to 10
                conn.execute(update(ConsumerPosition).where(ConsumerPosition.group_id == runner.group_id)
                             .values(next_offset=10))
            dropped = runner.poll_once()
            assert (dropped.applied, dropped.batches) == (0, 0)
            runner.run(until_caught_up=True, timeout_s=60)
            rows = snapshot(env.engine, runner.projection)["transcript_entries"]
        assert runner.stats.applied == 4 + 12  # offsets 0-3 here, 4-9 by "the other member", 10-21 here
        assert len(rows) == 16 and len({r[2] for r in rows}) == 16
    finally:
        close_env(env)
