"""The outbox relay killed (SIGKILL) between publish and mark: the rows stay pending, the next relay publishes
them again under the same event ids, and a consumer applies each change once — a duplicate, never a loss."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from events.projections.fhir_changes import FhirChangesProjection
from events.projections.runner import ProjectionRunner
from events.relay import Relay
from services.fhir_api.backbone.changes import OutboxListener
from services.fhir_api.store.interface import Context
from tests.events.projections import helpers as h
from tests.wiring import store_on

pytestmark = pytest.mark.slow  # whole pipelines, subprocesses or real services: not in the fast lane

REPO = h.__file__.rsplit("/tests/", 1)[0]


@pytest.mark.parametrize("backend", h.BACKENDS)
def test_relay_killed_between_publish_and_mark(backend: str, request: pytest.FixtureRequest) -> None:
    bootstrap = request.getfixturevalue("kafka_bootstrap") if backend == "kafka" else None
    url = request.getfixturevalue("postgres_url" if backend == "sql-postgres" else "sqlite_url")
    env = h.make_env(backend, url, bootstrap)
    try:
        store = store_on(url)
        store.add_change_listener(OutboxListener(env.fhir_changes))
        ids = [store.create(Context(), {"resourceType": "Patient", "gender": "female"}).id for _ in range(5)]
        crashed = subprocess.run(
            [sys.executable, "-m", "tests.events.faults.crashing_relay"], cwd=REPO, capture_output=True,
            env={**os.environ, "ROUNDS_DATABASE_URL": url, "ROUNDS_BUS": env.settings.bus,
                 "ROUNDS_KAFKA_BOOTSTRAP": bootstrap or ""}, timeout=180,
        )
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr.decode()
        relay = Relay(env.engine, env.bus)
        assert relay.pending() == 5  # published but never marked
        first = h.read_all(env, env.fhir_changes, expected=5)
        assert sorted(r.event.data["id"] for r in first) == sorted(ids)

        assert relay.drain() == 5 and relay.pending() == 0
        records = h.read_all(env, env.fhir_changes, expected=10)
        assert len(records) == 10 and len({r.event.id for r in records}) == 5  # duplicates: same ids

        runner = ProjectionRunner(env.bus, env.engine, FhirChangesProjection(topics=(env.fhir_changes,)),
                                  deadletter_topic=env.deadletter, poll_timeout_s=0.2)
        with runner:
            stats = runner.run(until_caught_up=True, timeout_s=180)
            rows = h.snapshot(env.engine, runner.projection)["fhir_changes"]
        assert (stats.applied, stats.duplicates, stats.dead_lettered) == (5, 5, 0)
        assert sorted(row[2] for row in rows) == sorted(ids)
    finally:
        h.close_env(env)
