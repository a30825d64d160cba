"""A relay process that publishes one batch of the outbox and is SIGKILLed before it can mark the rows sent.

Run by test_relay_crash.py: `python -m tests.events.faults.crashing_relay` with ROUNDS_DATABASE_URL,
ROUNDS_BUS and ROUNDS_KAFKA_BOOTSTRAP in the environment.
"""

from __future__ import annotations

import os
import signal

from events.relay import Relay
from foundation.db import make_engine
from rounds.settings import Settings
from tests.wiring import bus_on


def _die(_ids: list[int]) -> None:
    os.kill(os.getpid(), signal.SIGKILL)  # published and acknowledged, not yet marked


if __name__ == "__main__":
    settings = Settings()
    Relay(make_engine(settings.database_url), bus_on(settings), after_publish=_die).run_once()
    raise SystemExit("unreachable: the relay should have been killed after publishing")
