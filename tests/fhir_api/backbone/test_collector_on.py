"""The FHIR API never runs with the cycle collector off: under recorded session traffic, /fhir reads and
writes relayed from the outbox (the library paths that publish and consume), nothing calls gc.disable and the
collector is on at every sample — in-process on every backend, and in a real `rounds serve` (its /health)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import orjson
import pytest

from services.fhir_api.app import create_app
from services.fhir_api.backbone.wiring import BackboneSettings, install_event_backbone
from tests.events.projections import helpers as h
from tests.fhir_api.conftest import free_port, start_live
from tests.wiring import store_on

pytestmark = pytest.mark.slow  # whole pipelines, subprocesses or real services: not in the fast lane

FHIR_JSON = {"Content-Type": "application/fhir+json"}


@pytest.fixture(params=["sql-sqlite", "kafka"])
def env(request: pytest.FixtureRequest) -> Iterator[h.Env]:
    bootstrap = request.getfixturevalue("kafka_bootstrap") if request.param == "kafka" else None
    environment = h.make_env(request.param, request.getfixturevalue("sqlite_url"), bootstrap)
    yield environment
    h.close_env(environment)


class CollectorWatch:
    """Records every gc.disable call (with the caller) and samples gc.isenabled() from its own thread."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.disabled_by: list[str] = []
        self.samples = self.off = 0
        self._stop = threading.Event()
        original = gc.disable

        def disable() -> None:
            frame = sys._getframe(1)
            self.disabled_by.append(f"{frame.f_code.co_filename}:{frame.f_lineno}")
            original()

        monkeypatch.setattr(gc, "disable", disable)
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.samples += 1
            self.off += not gc.isenabled()
            time.sleep(0.0005)

    def __enter__(self) -> CollectorWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def traffic(root: str, clients: int = 8, rounds: int = 12) -> list[int]:
    """Concurrent clients, each on its own session: reads and writes through the session (recorded), reads
    and writes on /fhir (writes go through the outbox and the relay)."""
    def one(index: int) -> list[int]:
        statuses = []
        with httpx.Client(base_url=root, timeout=60) as c:
            base = f"/sessions/{c.post('/sessions', json={}).json()['id']}/fhir"
            for n in range(rounds):
                resource = {"resourceType": "Patient", "gender": "female", "birthDate": f"19{n:02d}"}
                body = orjson.dumps(resource)
                statuses.append(c.post(f"{base}/Patient", content=body, headers=FHIR_JSON).status_code)
                statuses.append(c.get(f"{base}/Patient", params={"_count": "20"}).status_code)
                statuses.append(c.get("/fhir/Patient", params={"gender": "female"}).status_code)
                if n % 4 == index % 4:
                    statuses.append(c.post("/fhir/Patient", content=body, headers=FHIR_JSON).status_code)
        return statuses

    with ThreadPoolExecutor(clients) as pool:
        return [status for statuses in pool.map(one, range(clients)) for status in statuses]


def test_the_app_under_load_never_turns_it_off(env: h.Env, monkeypatch: pytest.MonkeyPatch) -> None:
    store = store_on(env.settings.database_url)
    app = create_app(env.settings, store=store)
    wired = install_event_backbone(app, env.settings, bus=env.bus, backbone=BackboneSettings(),
                                   sessions_topic=env.sessions, changes_topic=env.fhir_changes)
    api, server, thread = start_live(app, store)
    try:
        with CollectorWatch(monkeypatch) as watch:
            statuses = traffic(api.root)
            deadline = time.monotonic() + 60
            while wired.relay.pending() and time.monotonic() < deadline:  # the relay thread publishes too
                time.sleep(0.05)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    assert set(statuses) == {200, 201} and wired.relay.pending() == 0
    assert wired.recorder.health.recorded == 8 * 12 * 2  # the publish paths really ran
    assert watch.disabled_by == [] and watch.samples > 100 and watch.off == 0


def test_rounds_serve_keeps_the_collector_on_under_load(sqlite_url: str) -> None:
    port = free_port()
    root = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rounds.cli", "serve", "--database-url", sqlite_url, "--port", str(port)],
        env={**os.environ, "ROUNDS_BUS": "sql", "ROUNDS_BASE_URL": ""},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{root}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
            assert time.monotonic() < deadline, "rounds serve did not come up"
            time.sleep(0.3)
        seen: list[dict] = []
        done = threading.Event()

        def watch() -> None:
            with httpx.Client(timeout=30) as c:
                while not done.is_set():
                    seen.append(c.get(f"{root}/health").json()["checks"]["collector"])

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            statuses = traffic(root, clients=6, rounds=8)
        finally:
            done.set()
            watcher.join(30)
        final = httpx.get(f"{root}/health").json()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert set(statuses) == {200, 201}
    assert len(seen) > 10 and all(sample["gcEnabled"] for sample in seen)
    assert final["status"] == "ok" and final["checks"]["collector"]["gcFrozen"] > 10_000
    assert final["checks"]["event-recorder"]["recorded"] == 6 * 8 * 2
