"""Event backbone fixtures: a `bus` per backend (SQL log on SQLite and PostgreSQL, the real Kafka broker)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest

from events import payloads as p
from events.bus import Bus, TopicSpec
from events.catalog import make_event
from events.envelope import CloudEvent
from foundation.db import make_engine
from rounds.migrate import upgrade

BACKENDS = ["sql-sqlite", "sql-postgres", "kafka"]


def open_backend(name: str, request: pytest.FixtureRequest) -> Bus:
    if name == "kafka":
        from events.kafka_bus import KafkaBus

        return KafkaBus(request.getfixturevalue("kafka_bootstrap"))
    from events.sql_log import SqlLog

    url = request.getfixturevalue("sqlite_url" if name == "sql-sqlite" else "postgres_url")
    upgrade(url)
    return SqlLog(make_engine(url), rebalance_interval_s=0.1)


@pytest.fixture(params=BACKENDS)
def bus(request: pytest.FixtureRequest) -> Iterator[Bus]:
    """Every backend in turn; Kafka is the real broker from scripts/kafka.sh."""
    if request.param == "kafka":
        request.applymarker(pytest.mark.kafka)
    instance = open_backend(request.param, request)
    yield instance
    instance.close()


@pytest.fixture
def new_topic(bus: Bus) -> Callable[[int], str]:
    """Create a uniquely named topic (tests never share topics on the shared broker)."""

    def make(partitions: int = 3) -> str:
        name = f"test.{uuid.uuid4().hex[:10]}"
        bus.ensure_topics([TopicSpec(name, partitions)])
        return name

    return make


def tool_call(session: str, n: int, **kw) -> CloudEvent:
    """A small valid session event; `n` is carried as the call id and the sequence."""
    return make_event(
        "rounds.tool.call",
        p.ToolCall(call_id=f"c{n}", name="search", arguments={"n": n}),
        source="/rounds/tests",
        subject=session,
        sequence=n,
        **kw,
    )
