"""Two relays in two processes on one SQLite file publish every outbox row exactly once, in order.

`rounds serve` relays its outbox in-process while `rounds run` (or a second server) relays the same database;
on SQLite nothing but the relay's claim (events/relay_claim.py) keeps them from publishing a row twice."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

from events.bus import TopicSpec
from events.catalog import CATALOG
from events.outbox import append
from events.payloads import SessionStarted
from events.relay_claim import lock_path
from foundation.db import make_engine
from rounds.migrate import upgrade
from rounds.settings import Settings
from tests.events.projections.helpers import read_all
from tests.wiring import bus_on

REPO = Path(__file__).resolve().parents[2]
ROWS = 240


def _events(topic_tag: str, count: int):
    return [
        (f"s-{topic_tag}-{i % 6}", CATALOG.make("rounds.session.started", SessionStarted(assistant=f"a{i}"),
                                                source="/tests/relay", subject=f"s-{topic_tag}-{i % 6}"))
        for i in range(count)
    ]


def test_two_relay_processes_on_one_sqlite_file_publish_each_event_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'rounds.sqlite'}"
    upgrade(url)
    topic = f"t{uuid.uuid4().hex[:8]}.sessions"
    settings = Settings(database_url=url, bus="sql")
    bus = bus_on(settings)
    bus.ensure_topics([TopicSpec(name=topic, partitions=3)])
    engine = make_engine(url)
    stop = tmp_path / "stop"
    relay = [sys.executable, "-m", "tests.events.two_relays", url, str(stop)]
    relays = [subprocess.Popen(relay, cwd=REPO) for _ in range(2)]
    try:
        produced = _events("x", ROWS)
        for start in range(0, ROWS, 8):  # written while both relays poll, as the API writes
            with engine.begin() as conn:
                append(conn, topic, produced[start:start + 8])
        stop.touch()
        for proc in relays:
            assert proc.wait(timeout=120) == 0
    finally:
        for proc in relays:
            proc.kill()
    records = read_all(_Env(bus, topic), topic, expected=ROWS)
    counts = Counter(r.event.id for r in records)
    assert [i for i, n in counts.items() if n > 1] == []
    assert set(counts) == {event.id for _, event in produced}
    by_key: dict[str, list[str]] = {}
    for record in records:  # per key (a session), the log keeps the order the rows were written in
        by_key.setdefault(record.key, []).append(record.event.id)
    written: dict[str, list[str]] = {}
    for key, event in produced:
        written.setdefault(key, []).append(event.id)
    assert by_key == written
    assert lock_path(engine) == tmp_path / "rounds.sqlite-relay.lock"
    bus.close()
    engine.dispose()


def test_an_in_memory_or_server_database_needs_no_claim_file() -> None:
    assert lock_path(make_engine("sqlite://")) is None
    assert lock_path(make_engine("postgresql+psycopg://u@127.0.0.1:1/x")) is None


class _Env:
    """What read_all needs of a test environment: the bus."""

    def __init__(self, bus, topic: str) -> None:
        self.bus, self.name, self.sessions = bus, "sql-sqlite", topic
