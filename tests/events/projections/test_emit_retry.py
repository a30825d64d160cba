"""Projections that emit and retry, on every backend: events emitted by a handler are published once its batch
commits and never when it rolls back; `RetryLater` retries the batch after a backoff and never dead-letters;
`prefetch` runs with no database connection held by the runner."""

from __future__ import annotations

import time
from collections import Counter

from sqlalchemy import func, select

from events.bus import TopicSpec
from events.outbox import OUTBOX
from events.projections.replay import replay
from events.projections.retry import Backoff, RetryLater
from events.projections.runner import ProjectionRunner
from tests.events.projections.emitting import ScoreCounter, ScoringProjection
from tests.events.projections.helpers import Env, publish_sessions, read_all, snapshot

FAST = Backoff(initial_s=0.01, max_s=0.05)


def scores_topic(env: Env) -> str:
    name = f"{env.sessions}.scores"
    env.bus.ensure_topics([TopicSpec(name, 3)])
    return name


def runner_for(env: Env, projection, **kw) -> ProjectionRunner:
    return ProjectionRunner(env.bus, env.engine, projection, deadletter_topic=env.deadletter,
                            poll_timeout_s=0.2, backoff=FAST, **kw)


def doctor_ids(streams) -> list[str]:
    doctor = "rounds.message.doctor"
    return sorted(e.data["id"] for events in streams.values() for e in events if e.type == doctor)


def pending(env: Env) -> int:
    with env.engine.connect() as conn:
        return conn.execute(select(func.count()).where(OUTBOX.c.sent_at.is_(None))).scalar_one()


def test_emitted_events_are_published_once_and_counted_once_downstream(env: Env) -> None:
    scores = scores_topic(env)
    streams = publish_sessions(env, count=3, turns=2)
    with runner_for(env, ScoringProjection(scores, topics=env.topics), batch_size=4) as runner:
        stats = runner.run(until_caught_up=True, timeout_s=120)
    assert stats.emitted == stats.applied == 6 and pending(env) == 0
    published = read_all(env, scores, expected=6)
    assert sorted(r.event.data["messageId"] for r in published) == doctor_ids(streams)
    assert {r.key for r in published} == set(streams)  # routed by the catalog: key = session id
    with runner_for(env, ScoreCounter(topics=(scores,))) as counter:
        assert counter.run(until_caught_up=True, timeout_s=120).applied == 6


def test_a_replay_emits_nothing_unless_asked(env: Env) -> None:
    scores = scores_topic(env)
    streams = publish_sessions(env, count=2, turns=1)

    class Scoring(ScoringProjection):
        def __init__(self, suffix: str = "", topics: tuple[str, ...] | None = None) -> None:
            super().__init__(scores, suffix, topics)

    quiet = replay(env.bus, env.engine, Scoring, topics=env.topics, timeout_s=120)
    assert quiet.stats.applied == 2 and quiet.stats.emitted == 0 and pending(env) == 0
    assert read_all(env, scores, expected=0, timeout_s=1) == []
    loud = replay(env.bus, env.engine, Scoring, topics=env.topics, timeout_s=120, emit=True)
    assert loud.stats.emitted == 2
    assert sorted(r.event.data["messageId"] for r in read_all(env, scores, expected=2)) == doctor_ids(streams)


class PoisonScoring(ScoringProjection):
    """Emits, then rejects the first doctor message of every session: its emitted event must never appear."""

    def handle(self, tx, record) -> None:
        super().handle(tx, record)
        if record.event.data["id"].endswith("-d0"):
            raise ValueError("rejected after emitting")


def test_a_rolled_back_handler_publishes_nothing(env: Env) -> None:
    scores = scores_topic(env)
    streams = publish_sessions(env, count=2, turns=2)
    with runner_for(env, PoisonScoring(scores, topics=env.topics)) as runner:
        stats = runner.run(until_caught_up=True, timeout_s=120)
    assert (stats.applied, stats.dead_lettered, stats.emitted) == (2, 2, 2)
    published = read_all(env, scores, expected=2, timeout_s=10)
    assert sorted(r.event.data["messageId"] for r in published) == [i for i in doctor_ids(streams)
                                                                    if i.endswith("-d1")]
    assert len(read_all(env, env.deadletter, expected=2)) == 2


class FlakyScoring(ScoringProjection):
    """Raises RetryLater for `failures` attempts at each message in `flaky` (in handle or in prefetch)."""

    def __init__(self, *args, flaky: set[str], failures: int, where: str = "handle", **kw) -> None:
        super().__init__(*args, **kw)
        self.flaky, self.failures, self.where = flaky, failures, where
        self.attempts: Counter[str] = Counter()
        self.engine = None
        self.connections_held: list[int] = []

    def _maybe_fail(self, message_id: str) -> None:
        if message_id in self.flaky:
            self.attempts[message_id] += 1
            if self.attempts[message_id] <= self.failures:
                raise RetryLater(f"judge timed out for {message_id}")

    def prefetch(self, records):
        self.connections_held.append(self.engine.pool.checkedout())
        if self.where == "prefetch":
            for record in records:
                self._maybe_fail(record.event.data["id"])
        return {record.event.data["id"]: "judged" for record in records}

    def handle(self, tx, record) -> None:
        assert tx.prefetched[record.event.data["id"]] == "judged"
        if self.where == "handle":
            self._maybe_fail(record.event.data["id"])
        super().handle(tx, record)


def test_retry_later_is_retried_until_it_succeeds_and_never_dead_lettered(env: Env) -> None:
    scores = scores_topic(env)
    streams = publish_sessions(env, count=2, turns=2)
    flaky = doctor_ids(streams)[0]
    for where in ("handle", "prefetch"):
        projection = FlakyScoring(scores, topics=env.topics, suffix=where, flaky={flaky}, failures=3,
                                  where=where)
        projection.engine = env.engine
        with runner_for(env, projection) as runner:
            stats = runner.run(until_caught_up=True, timeout_s=120)
            rows = snapshot(env.engine, projection)["scored"]
        assert stats.retries == 3 and stats.dead_lettered == 0, where
        assert stats.applied == 4 and projection.attempts[flaky] == 4  # 4 = 3 failed + 1
        assert sorted(row[0] for row in rows) == doctor_ids(streams)
        assert set(projection.connections_held) == {0}  # prefetch ran with no connection of the runner's out
    assert read_all(env, env.deadletter, expected=0, timeout_s=1) == []
    assert len(read_all(env, scores, expected=8)) == 8  # 4 messages x 2 runs, each emitted once


def test_a_handler_that_keeps_asking_to_retry_holds_its_place_and_is_never_dead_lettered(env: Env) -> None:
    scores = scores_topic(env)
    streams = publish_sessions(env, count=1, turns=3)
    first, stuck, last = doctor_ids(streams)
    projection = FlakyScoring(scores, topics=env.topics, flaky={stuck}, failures=10**6)
    projection.engine = env.engine
    runner = runner_for(env, projection, batch_size=1)
    with runner:
        deadline = time.monotonic() + 120  # polls, not time, are what a loaded broker's group join eats
        while projection.attempts[stuck] < 5 and time.monotonic() < deadline:
            runner.poll_once()
        assert projection.attempts[stuck] >= 5 and runner.stats.dead_lettered == 0
        assert [row[0] for row in snapshot(env.engine, projection)["scored"]] == [first]  # later events wait
        projection.failures = 0  # the judge is back
        stats = runner.run(until_caught_up=True, timeout_s=120)
    assert sorted(row[0] for row in snapshot(env.engine, projection)["scored"]) == [first, stuck, last]
    assert stats.dead_lettered == 0 and stats.retries >= 5
    assert read_all(env, env.deadletter, expected=0, timeout_s=1) == []


def test_backoff_grows_to_its_cap_honours_a_requested_delay_and_resets() -> None:
    backoff = Backoff(initial_s=0.1, factor=2, max_s=0.5)
    assert [backoff.delay() for _ in range(5)] == [0.1, 0.2, 0.4, 0.5, 0.5]
    backoff.reset()
    assert backoff.delay(requested_s=0.3) == 0.3 and backoff.delay(requested_s=9) == 0.5
