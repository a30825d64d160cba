"""Must show: a rest-hook receiver gets every new lab of a replayed admission in clinical order,
once each after deduplication by event id, across a kill -9 of the delivering consumer; on SQLite (SQL log)
and on Kafka + PostgreSQL. The Backport IG's `event-number`s it sees run 1..N with no gap and no repeat (a
redelivery after the kill keeps its number), and `Subscription/{id}/$status` answers N.

The record is one real MIMIC-IV demo admission mapped by the project's mapper and bulk-loaded. A session
opened at T0 gets a Subscription (through the FHIR API, so its write reaches the log by the outbox); the
delivering consumer runs as its own process (`rounds subscriptions deliver`); `rounds feed` moves the clock to
T1; the consumer is killed with SIGKILL a third of the way through and started again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from datetime import datetime

import httpx
import orjson
import pytest

from events.bus import TopicSpec
from foundation.db import make_engine
from rounds.migrate import upgrade
from services.fhir_api.store.cursor import pages
from services.fhir_api.store.interface import Context
from services.fhir_api.store.known_time import clinical_time
from services.fhir_api.subscriptions.feed import feed
from tests.fhir_api.subscriptions.conftest import live_with_changes, subscription
from tests.wiring import load_on

T0, T1 = "2148-08-14T12:00:00Z", "2148-08-16T18:00:00Z"


def consumer(url: str, root: str, topic: str, group: str, extra_env: dict) -> subprocess.Popen:
    env = {**os.environ, "ROUNDS_DATABASE_URL": url, **extra_env}
    code = "from rounds.cli import app; app()"
    return subprocess.Popen([sys.executable, "-c", code, "subscriptions", "deliver", "--base-url", root,
                             "--topic", topic, "--group", group], env=env)


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def expected_labs(store, session: str, patient: str) -> list[str]:
    """The labs the session sees at T1 and not at T0, in clinical order (the store's own searches)."""
    params = [("patient", f"Patient/{patient}"), ("category", "laboratory")]

    def seen(at: str) -> dict[str, bytes]:
        return {r.id: r.raw for page in pages(store, Context(session, when(at)), "Observation", params)
                for r in page}

    before, after = seen(T0), seen(T1)
    new = [(clinical_time(orjson.loads(raw)), id) for id, raw in after.items() if id not in before]
    return [id for _, id in sorted(new)]


def unique(receiver) -> set[str]:
    return {n["body"]["id"] for n in receiver.notifications()}


def replay_across_a_kill(url: str, bus, extra_env: dict, admission_ndjson, receiver) -> None:
    upgrade(url)
    assert load_on(url, admission_ndjson, workers=1).errors == 0
    topic = f"test.changes.{uuid.uuid4().hex[:8]}"
    bus.ensure_topics([TopicSpec(topic, 3)])
    with live_with_changes(url, bus, topic) as (api, store):
        with (admission_ndjson / "MimicObservationLabevents.ndjson").open("rb") as labs:
            patient = orjson.loads(labs.readline())["subject"]["reference"].removeprefix("Patient/")
        session = httpx.post(f"{api.root}/sessions", json={"now": T0}).json()
        base = session["fhirBase"]
        criteria = f"Observation?patient=Patient/{patient}&category=laboratory"
        created = httpx.post(f"{base}/Subscription", json=subscription(criteria, receiver.url))
        assert created.status_code == 201, created.text
        expected = expected_labs(store, session["id"], patient)
        assert len(expected) > 100

        group = f"subscriptions-{uuid.uuid4().hex[:6]}"
        first = consumer(url, api.root, topic, group, extra_env)
        try:
            receiver.wait(lambda: "handshake" in receiver.kinds())
            status_url = f"{base}/Subscription/{created.json()['id']}"
            receiver.wait(lambda: httpx.get(status_url).json()["status"] == "active", 30)
            receiver.delay_s = 0.01  # slow enough that the kill lands mid-stream
            span = (when(T1) - when(T0)).total_seconds()
            report = feed(store, bus, session["id"], when(T0), when(T1), speed=span / 0.6, tick_s=0.1,
                          topic=topic)
            assert report.announced == len(expected) and report.ticks >= 5
            receiver.wait(lambda: len(receiver.notifications()) >= len(expected) // 3)
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
            killed_at = len(receiver.notifications())
            assert killed_at < len(expected)
            second = consumer(url, api.root, topic, group, extra_env)
            try:
                receiver.wait(lambda: len(unique(receiver)) >= len(expected), 120)
            finally:
                second.terminate()
                second.wait(timeout=10)
        finally:
            if first.poll() is None:
                first.kill()
        answer = httpx.post(f"{status_url}/$status").json()["entry"][0]["resource"]["parameter"]
    got, ids, numbered = [], {}, []
    for note in receiver.notifications():
        assert note["headers"]["X-Rounds-Event-Id"]
        number = event_number(note["body"])
        if note["body"]["id"] in ids:
            assert ids[note["body"]["id"]] == number  # a redelivery after the kill: the same notification
            continue
        ids[note["body"]["id"]] = number
        numbered.append(number)
        focus = note["body"]["entry"][1]
        assert focus["resource"]["id"] == focus["fullUrl"].rsplit("/", 1)[1]
        got.append(focus["resource"]["id"])
    assert got == expected  # every new lab, once, in clinical order
    assert numbered == list(range(1, len(expected) + 1))  # no gap, no number twice, across the kill
    since = next(p["valueString"] for p in answer if p["name"] == "events-since-subscription-start")
    assert since == str(len(expected))


def event_number(bundle: dict) -> int:
    params = bundle["entry"][0]["resource"]["parameter"]
    event = next(p for p in params if p["name"] == "notification-event")
    return int(next(p["valueString"] for p in event["part"] if p["name"] == "event-number"))


@pytest.mark.slow
def test_replayed_admission_reaches_the_receiver_across_a_kill_on_sqlite(sqlite_url, admission_ndjson,
                                                                          receiver):
    from events.sql_log import SqlLog

    upgrade(sqlite_url)
    bus = SqlLog(make_engine(sqlite_url))
    try:
        replay_across_a_kill(sqlite_url, bus, {"ROUNDS_BUS": "sql"}, admission_ndjson, receiver)
    finally:
        bus.close()


@pytest.mark.slow
@pytest.mark.kafka
def test_replayed_admission_reaches_the_receiver_across_a_kill_on_kafka_and_postgres(
        postgres_url, kafka_bootstrap, admission_ndjson, receiver):
    from events.kafka_bus import KafkaBus

    bus = KafkaBus(kafka_bootstrap)
    try:
        env = {"ROUNDS_BUS": "kafka", "ROUNDS_KAFKA_BOOTSTRAP": kafka_bootstrap}
        replay_across_a_kill(postgres_url, bus, env, admission_ndjson, receiver)
    finally:
        bus.close()
