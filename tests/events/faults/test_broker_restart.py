"""Restart the Kafka broker while a producer publishes: every acknowledged event is in the log afterwards and
a projection built from it holds each exactly once. Needs the test session's own broker (it is restarted)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from events.catalog import CATALOG
from events.payloads import EhrRequest
from events.projections.runner import ProjectionRunner
from events.projections.transcript import TranscriptProjection
from tests.events.projections.helpers import SOURCE, close_env, make_env, read_all, snapshot

pytestmark = pytest.mark.slow  # whole pipelines, subprocesses or real services: not in the fast lane


def _request(n: int):
    sid = f"s-restart-{n % 7}"
    payload = EhrRequest(request_id=f"r{n}", method="GET", url=f"Patient/{n}")
    event = CATALOG.make("rounds.ehr.request", payload, source=SOURCE, subject=sid, sequence=n + 1)
    return sid, event


@pytest.mark.kafka
@pytest.mark.slow
def test_broker_restart_while_producing_loses_no_acknowledged_event(kafka_service, sqlite_url: str) -> None:
    if os.environ.get("ROUNDS_TEST_KAFKA_BOOTSTRAP"):
        pytest.skip("restarts the broker: runs only on the test session's own broker "
                    "(unset ROUNDS_TEST_KAFKA_BOOTSTRAP)")
    env = make_env("kafka", sqlite_url, kafka_service.address)
    acked: list[str] = []
    errors: list[str] = []
    stop = threading.Event()

    def produce() -> None:
        n = 0
        while not stop.is_set():
            sid, event = _request(n)
            n += 1
            try:
                env.bus.publish(env.sessions, event, sid)  # returns only once acks=all is in
                acked.append(event.id)
            except Exception as exc:  # noqa: BLE001 - not acknowledged: allowed to be missing
                errors.append(repr(exc))
                time.sleep(0.2)

    def wait_for(count: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while len(acked) < count:
            assert time.monotonic() < deadline, f"producer stalled at {len(acked)}; errors: {errors[-3:]}"
            time.sleep(0.05)

    producer = threading.Thread(target=produce, daemon=True)
    try:
        producer.start()
        wait_for(200, 120)
        kafka_service.call("restart")
        after_restart = len(acked)
        wait_for(after_restart + 200, 180)  # the producer recovered on the restarted broker
        stop.set()
        producer.join(timeout=180)
        records = read_all(env, env.sessions, expected=len(acked), timeout_s=120)
        in_log = {r.event.id for r in records}
        assert set(acked) <= in_log, f"{len(set(acked) - in_log)} acknowledged events lost"

        runner = ProjectionRunner(env.bus, env.engine, TranscriptProjection(topics=env.topics),
                                  deadletter_topic=env.deadletter, poll_timeout_s=0.2)
        with runner:
            runner.run(until_caught_up=True, timeout_s=180)
            entries = snapshot(env.engine, runner.projection)["transcript_entries"]
        ids = [row[2] for row in entries]
        assert len(ids) == len(set(ids)) == len(in_log)  # each event once, duplicates (if any) dropped
        assert set(acked) <= set(ids)
    finally:
        stop.set()
        close_env(env)
