"""Fixtures of the Subscription attacks: a rest-hook receiver, and the live API with the delivering consumer
running beside it on SQLite (its log as the bus), endpoints timing out after 0.5 s and each failing endpoint
retried for RETRY_S."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import httpx
import pytest

from events.bus import TopicSpec
from events.projections.retry import Backoff
from events.sql_log import SqlLog
from foundation.db import make_engine
from rounds.migrate import upgrade
from services.fhir_api.subscriptions.delivery import Delivery
from tests.fhir_api.subscriptions.conftest import Receiver, live_with_changes, serve_receiver

RETRY_S = 1.0  # each failing endpoint's retry budget in these tests


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with serve_receiver() as state:
        yield state


@pytest.fixture
def world(sqlite_url: str) -> Iterator[tuple]:
    upgrade(sqlite_url)
    bus = SqlLog(make_engine(sqlite_url), rebalance_interval_s=0.1)
    topic = f"test.changes.{uuid.uuid4().hex[:8]}"
    bus.ensure_topics([TopicSpec(topic, 3)])
    with live_with_changes(sqlite_url, bus, topic) as (api, store):
        delivery = Delivery(store, bus, api.root, topic=topic, backoff=Backoff(0.05, 2.0, 0.2),
                            client=httpx.Client(timeout=0.5), retry_s=RETRY_S)
        runner = threading.Thread(target=delivery.run, daemon=True)
        runner.start()
        yield api, delivery, runner
        delivery.stop.set()
        runner.join(timeout=10)
    bus.close()
