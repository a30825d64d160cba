"""A scoring world per test: database (+ SQL log or Kafka), the FHIR API in process, a loaded record."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from contracts.scenario import Scenario
from events.bus import Bus
from rounds.migrate import upgrade
from rounds.settings import Settings
from tests.consumers.scoring import world
from tests.wiring import bus_on, client_on


@dataclass
class World:
    settings: Settings
    bus: Bus
    client: httpx.Client
    ids: dict[str, str]
    scenario: Scenario
    sessions: str
    scores: str

    def session(self) -> world.Session:
        return world.Session(self.bus, self.sessions, self.client)


def make_world(database_url: str, kafka_bootstrap: str | None = None) -> Iterator[World]:
    upgrade(database_url)
    settings = Settings(database_url=database_url, bus="kafka" if kafka_bootstrap else "sql",
                        kafka_bootstrap=kafka_bootstrap)
    bus = bus_on(settings)
    tag = uuid.uuid4().hex[:8]
    sessions, scores = f"t{tag}.sessions", f"t{tag}.scores"
    world.ensure(bus, sessions, scores)
    client = client_on(settings)
    try:
        ids = world.load_record(client)
        yield World(settings, bus, client, ids, world.scenario(ids), sessions, scores)
    finally:
        client.close()
        bus.close()


@pytest.fixture
def scoring_world(sqlite_url: str) -> Iterator[World]:
    yield from make_world(sqlite_url)
