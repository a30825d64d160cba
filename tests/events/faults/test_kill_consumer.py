"""SIGKILL a projection consumer process in the middle of a stream (while a producer is still publishing),
restart it, and the projection equals a clean rebuild: nothing lost, nothing applied twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from sqlalchemy import func, select

from events.projections.replay import replay
from events.projections.tracking import ProcessedEvent
from events.projections.transcript import TranscriptProjection
from tests.events.projections import helpers as h
from tests.events.projections.helpers import Env

pytestmark = pytest.mark.slow  # whole pipelines, subprocesses or real services: not in the fast lane

GROUP = "fault.transcript"


def _consumer(env: Env, *extra: str) -> subprocess.Popen:
    settings = env.settings
    environment = {**os.environ, "ROUNDS_DATABASE_URL": settings.database_url, "ROUNDS_BUS": settings.bus,
                   "ROUNDS_KAFKA_BOOTSTRAP": settings.kafka_bootstrap or ""}
    return subprocess.Popen(
        [sys.executable, "-m", "rounds.cli", "events", "project", "transcript", "--group", GROUP,
         "--topic", env.sessions, "--deadletter-topic", env.deadletter, *extra],
        env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )


def _entries(env: Env, projection: TranscriptProjection) -> int:
    table = projection.tables["transcript_entries"]
    try:
        with env.engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(table)).scalar_one()
    except Exception:  # noqa: BLE001 - the consumer has not created its tables yet
        return 0


def _processed(env: Env) -> int:
    """Event ids the consumer group recorded as processed (one per applied event, exactly once)."""
    with env.engine.connect() as conn:
        query = select(func.count()).select_from(ProcessedEvent).where(ProcessedEvent.group_id == GROUP)
        return conn.execute(query).scalar_one()


def _publish(env: Env, sessions: int) -> int:
    streams = [h.session_events(h.session_id(), turns=3) for _ in range(sessions)]
    items = list(h.interleave(streams))
    for start in range(0, len(items), 20):  # small batches over time, like live sessions
        env.bus.publish_many(env.sessions, items[start:start + 20])
        time.sleep(0.02)
    return len(items)


@pytest.mark.parametrize("backend", ["sql-sqlite", "sql-postgres", "kafka"])
def test_sigkill_mid_stream_then_restart_equals_clean_run(backend: str, request: pytest.FixtureRequest,
                                                          ) -> None:
    bootstrap = request.getfixturevalue("kafka_bootstrap") if backend == "kafka" else None
    url = request.getfixturevalue("postgres_url" if backend == "sql-postgres" else "sqlite_url")
    env = h.make_env(backend, url, bootstrap)
    live = TranscriptProjection(topics=env.topics)
    started: list[subprocess.Popen] = []  # killed at the end whatever happens: none may outlive the test
    try:
        total = _publish(env, 20)
        consumer = _consumer(env, "--batch-size", "10")
        started.append(consumer)
        more: list[int] = []
        producer = threading.Thread(target=lambda: more.append(_publish(env, 20)))
        producer.start()  # keeps publishing while the consumer runs and dies
        deadline = time.monotonic() + 300  # a consumer group's first join is slow on a loaded machine
        while _entries(env, live) < 120:
            assert consumer.poll() is None, consumer.stdout.read().decode()
            if time.monotonic() > deadline:  # say what the consumer said (it is killed to read it)
                consumer.kill()
                seen = _entries(env, live)
                pytest.fail(f"the consumer applied {seen} of 120 entries in 300 s:\n"
                            f"{consumer.communicate()[0].decode()[-3000:]}")
            time.sleep(0.05)
        consumer.send_signal(signal.SIGKILL)
        consumer.wait(timeout=30)
        killed_at = _entries(env, live)
        producer.join()
        total += more[0]
        assert killed_at < total, "the consumer finished before it was killed: the test proves nothing"

        restarted = _consumer(env, "--batch-size", "50", "--until-caught-up")
        started.append(restarted)
        out, _ = restarted.communicate(timeout=240)
        assert restarted.returncode == 0, out.decode()

        clean = replay(env.bus, env.engine, TranscriptProjection, topics=env.topics, timeout_s=240)
        assert clean.stats.applied == total
        after = h.snapshot(env.engine, live)
        assert after == h.snapshot(env.engine, TranscriptProjection(suffix=clean.suffix, topics=env.topics))
        assert len(after["transcript_entries"]) == total  # nothing lost, nothing doubled
        processed = _processed(env)
        assert processed == total
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)
        h.close_env(env)


def test_sigterm_finishes_the_batch_and_exits_cleanly(sqlite_url: str) -> None:
    env = h.make_env("sql-sqlite", sqlite_url)
    live = TranscriptProjection(topics=env.topics)
    try:
        total = _publish(env, 30)
        consumer = _consumer(env, "--batch-size", "5")
        deadline = time.monotonic() + 300  # a consumer group's first join is slow on a loaded machine
        while _entries(env, live) < 20:
            assert consumer.poll() is None and time.monotonic() < deadline, "the consumer made no progress"
            time.sleep(0.05)
        consumer.send_signal(signal.SIGTERM)
        out, _ = consumer.communicate(timeout=60)
        assert consumer.returncode == 0, out.decode()
        report = json.loads(out.decode().strip().splitlines()[-1])
        applied = _entries(env, live)
        assert report["applied"] == applied < total  # stopped early; what it reported is what it committed
        processed = _processed(env)
        assert processed == applied
    finally:
        h.close_env(env)
