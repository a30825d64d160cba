"""A projection process that emits events and is SIGKILLed after its first commit, before the relay
(`after-commit`), or after the relay published the emitted events but before it marked them sent
(`after-publish`).

Run by test_emit_crash.py: `python -m tests.events.faults.emitting_runner MODE SESSIONS SCORES DEADLETTER`
with ROUNDS_DATABASE_URL, ROUNDS_BUS and ROUNDS_KAFKA_BOOTSTRAP in the environment.
"""

from __future__ import annotations

import os
import signal
import sys

from events.projections.runner import ProjectionRunner
from foundation.db import make_engine
from rounds.settings import Settings
from tests.events.projections.emitting import ScoringProjection
from tests.wiring import bus_on


def _die(*_args: object) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    mode, sessions, scores, deadletter = sys.argv[1:5]
    settings = Settings()
    runner = ProjectionRunner(bus_on(settings), make_engine(settings.database_url),
                              ScoringProjection(scores, topics=(sessions,)), deadletter_topic=deadletter,
                              batch_size=1000, poll_timeout_s=0.2,
                              after_commit=_die if mode == "after-commit" else None)
    if mode == "after-publish":
        runner.relay.after_publish = _die
    with runner:
        runner.run(until_caught_up=True, timeout_s=120)
    raise SystemExit("unreachable: the runner should have been killed")
