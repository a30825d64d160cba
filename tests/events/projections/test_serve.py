"""`rounds serve` takes the bus configuration (ROUNDS_BUS, ROUNDS_KAFKA_BOOTSTRAP): a real server process
records session EHR interactions on rounds.sessions and relays /fhir writes to rounds.fhir-changes, on both
backends."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx
import pytest

from events.topics import FHIR_CHANGES, SESSIONS
from rounds.settings import Settings
from tests.wiring import bus_on

pytestmark = pytest.mark.slow  # whole pipelines, subprocesses or real services: not in the fast lane


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_up(proc: subprocess.Popen, root: str) -> None:
    deadline = time.monotonic() + 90
    while True:
        try:
            httpx.get(f"{root}/fhir/metadata", timeout=5)
            return
        except httpx.TransportError:
            assert proc.poll() is None, proc.stdout.read().decode()
            assert time.monotonic() < deadline, "rounds serve did not come up"
            time.sleep(0.3)


def _matching(bus, topic: str, wanted, expected: int, timeout_s: float = 60) -> list:
    reader = bus.reader([topic])
    found: list = []
    deadline = time.monotonic() + timeout_s
    while len(found) < expected and time.monotonic() < deadline:
        found.extend(r for r in reader.poll(timeout_s=0.5, max_records=2000) if wanted(r))
    reader.close()
    return found


@pytest.mark.parametrize("backend", ["sql", "kafka"])
def test_rounds_serve_records_on_the_configured_bus(backend: str, request: pytest.FixtureRequest,
                                                     sqlite_url: str) -> None:
    bootstrap = request.getfixturevalue("kafka_bootstrap") if backend == "kafka" else ""
    port = _free_port()
    env = {**os.environ, "ROUNDS_BUS": backend, "ROUNDS_KAFKA_BOOTSTRAP": bootstrap, "ROUNDS_BASE_URL": ""}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rounds.cli", "serve", "--database-url", sqlite_url, "--port", str(port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    root = f"http://127.0.0.1:{port}"
    try:
        _wait_up(proc, root)
        sid = httpx.post(f"{root}/sessions", json={}).json()["id"]
        assert httpx.get(f"{root}/sessions/{sid}/fhir/Patient", params={"gender": "male"}).status_code == 200
        created = httpx.post(f"{root}/fhir/Patient", json={"resourceType": "Patient", "gender": "other"},
                             headers={"Content-Type": "application/fhir+json"})
        assert created.status_code == 201
        pid = created.json()["id"]
        bus = bus_on(Settings(database_url=sqlite_url, bus=backend, kafka_bootstrap=bootstrap or None))
        session_events = _matching(bus, SESSIONS, lambda r: r.key == sid, expected=2)
        changes = _matching(bus, FHIR_CHANGES, lambda r: r.key == f"Patient/{pid}", expected=1)
        bus.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert [(e.event.type, e.event.sequence) for e in session_events] == [
        ("rounds.ehr.request", 1), ("rounds.ehr.response", 2)]
    assert session_events[0].event.data["query"] == {"gender": ["male"]}
    assert [c.event.type for c in changes] == ["rounds.fhir.resource.created"]
