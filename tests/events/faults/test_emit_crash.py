"""A projection that emits events, SIGKILLed between its commit and the relay (the emitted events are only in
the outbox) or between the relay's publish and its mark (they are on the topic, still pending): after a
restart every emitted event is on the topic — once, or as a same-id duplicate — and the downstream consumer
counts each exactly once. On the SQL log (SQLite, PostgreSQL) and on Kafka."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from events.bus import TopicSpec
from events.projections.runner import ProjectionRunner
from events.relay import Relay
from tests.events.projections import helpers as h
from tests.events.projections.emitting import ScoreCounter, ScoringProjection

pytestmark = pytest.mark.slow  # whole pipelines, subprocesses or real services: not in the fast lane

REPO = h.__file__.rsplit("/tests/", 1)[0]


def _killed_run(env: h.Env, mode: str, scores: str) -> None:
    settings = env.settings
    crashed = subprocess.run(
        [sys.executable, "-m", "tests.events.faults.emitting_runner", mode, env.sessions, scores,
         env.deadletter],
        cwd=REPO, capture_output=True, timeout=180,
        env={**os.environ, "ROUNDS_DATABASE_URL": settings.database_url, "ROUNDS_BUS": settings.bus,
             "ROUNDS_KAFKA_BOOTSTRAP": settings.kafka_bootstrap or ""},
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr.decode()[-3000:]


@pytest.mark.parametrize("mode", ["after-commit", "after-publish"])
@pytest.mark.parametrize("backend", h.BACKENDS)
def test_emitted_events_survive_sigkill_and_count_once_downstream(
    backend: str, mode: str, request: pytest.FixtureRequest
) -> None:
    bootstrap = request.getfixturevalue("kafka_bootstrap") if backend == "kafka" else None
    url = request.getfixturevalue("postgres_url" if backend == "sql-postgres" else "sqlite_url")
    env = h.make_env(backend, url, bootstrap)
    try:
        scores = f"{env.sessions}.scores"
        env.bus.ensure_topics([TopicSpec(scores, 3)])
        streams = h.publish_sessions(env, count=3, turns=2)
        doctor = "rounds.message.doctor"
        expected = sorted(e.data["id"] for s in streams.values() for e in s if e.type == doctor)

        _killed_run(env, mode, scores)
        relay = Relay(env.engine, env.bus)
        assert relay.pending() == 6  # committed with the projection's rows, never marked sent
        on_topic = h.read_all(env, scores, expected=6, timeout_s=5 if mode == "after-commit" else 30)
        assert len(on_topic) == (0 if mode == "after-commit" else 6)

        restarted = ProjectionRunner(env.bus, env.engine, ScoringProjection(scores, topics=env.topics),
                                     deadletter_topic=env.deadletter, poll_timeout_s=0.2)
        with restarted:
            stats = restarted.run(until_caught_up=True, timeout_s=180)
        assert (stats.applied, stats.emitted) == (0, 0)  # the killed run's commit stands: nothing re-applied
        assert relay.pending() == 0  # the restarted runner relayed what the killed one left
        published = h.read_all(env, scores, expected=6 if mode == "after-commit" else 12)
        assert len(published) == (6 if mode == "after-commit" else 12)
        assert len({r.event.id for r in published}) == 6  # a re-publish carries the same event id
        assert sorted({r.event.data["messageId"] for r in published}) == expected

        with ProjectionRunner(env.bus, env.engine, ScoreCounter(topics=(scores,)),
                              deadletter_topic=env.deadletter, poll_timeout_s=0.2) as counter:
            downstream = counter.run(until_caught_up=True, timeout_s=180)
            rows = h.snapshot(env.engine, counter.projection)["scores"]
        assert (downstream.applied, downstream.duplicates) == (6, 0 if mode == "after-commit" else 6)
        assert sorted(row[1] for row in rows) == expected
    finally:
        h.close_env(env)
