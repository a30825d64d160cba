"""A relay process for tests/events/test_two_relays.py: drains one SQLite file's outbox until told to stop.

Each publish is slowed down so that, without a claim, two relays would read the same pending rows."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from events.relay import Relay
from foundation.db import make_engine
from rounds.settings import Settings
from tests.wiring import bus_on


class SlowBus:
    """The real embedded log, with a pause before each publish (widens the read-publish-mark window)."""

    def __init__(self, bus) -> None:
        self.bus = bus

    def publish_many(self, topic, items):
        time.sleep(0.02)
        return self.bus.publish_many(topic, items)


def main(url: str, stop_file: str) -> None:
    bus = bus_on(Settings(database_url=url, bus="sql"))
    relay = Relay(make_engine(url), SlowBus(bus), batch_size=7)
    stop = Path(stop_file)
    while True:
        relay.drain()
        if stop.exists() and relay.pending() == 0:
            break
        time.sleep(0.005)
    bus.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
