"""Subscriptions fixtures: one MIMIC-IV demo admission mapped by the project's mapper (its patient, the
admission and its labs only: seconds, not the whole demo), a rest-hook receiver, and a live API with the
event backbone on a given database and bus."""

from __future__ import annotations

import csv
import gzip
import io
import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

HADM = "29600294"  # an observation admission of the demo with ~300 labs over four days
HEARTBEAT_URL = "http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/backport-heartbeat-period"
TABLES = ("patients", "admissions", "transfers", "d_labitems")


@pytest.fixture(scope="session")
def admission_ndjson(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The admission's Patient, Encounter and lab Observations as mapped NDJSON."""
    from fhir_mapper.pipeline import run_map

    demo = shared_data / "mimic-iv-demo" / "hosp"
    if not (demo / "labevents.csv.gz").exists():
        pytest.skip(f"MIMIC-IV demo not found at {demo}")
    work = tmp_path_factory.mktemp("admission")
    hosp = work / "mimic" / "hosp"
    hosp.mkdir(parents=True)
    for table in TABLES:
        (hosp / f"{table}.csv.gz").symlink_to(demo / f"{table}.csv.gz")
    with gzip.open(demo / "labevents.csv.gz", "rt", newline="") as fh:
        reader = csv.DictReader(fh)
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=reader.fieldnames, lineterminator="\n")
        writer.writeheader()
        writer.writerows(r for r in reader if r["hadm_id"] == HADM)
    (hosp / "labevents.csv.gz").write_bytes(gzip.compress(buf.getvalue().encode(), compresslevel=1))
    run_map(work / "mimic", work / "fhir", workers=1)
    return work / "fhir"


@dataclass
class Receiver:
    """A rest-hook endpoint: records every POST (headers, JSON body); answers `status` after `delay_s`."""

    url: str = ""
    posts: list[dict] = field(default_factory=list)
    status: int = 200
    delay_s: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def notifications(self) -> list[dict]:
        with self.lock:
            return [p for p in self.posts if _kind(p["body"]) == "event-notification"]

    def kinds(self) -> list[str]:
        with self.lock:
            return [_kind(p["body"]) for p in self.posts]

    def wait(self, predicate, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            assert time.monotonic() < deadline, f"timed out; received {self.kinds()[-5:]}"
            time.sleep(0.05)


def _kind(bundle: dict) -> str:
    params = bundle["entry"][0]["resource"]["parameter"]
    return next(p["valueCode"] for p in params if p["name"] == "type")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with serve_receiver() as state:
        yield state


@contextmanager
def serve_receiver(status: int = 200, delay_s: float = 0.0) -> Iterator[Receiver]:
    """A rest-hook receiver on a free loopback port for the block's duration."""
    state = Receiver(status=status, delay_s=delay_s)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            time.sleep(state.delay_s)
            if state.status < 300:
                with state.lock:
                    state.posts.append({"headers": dict(self.headers), "body": json.loads(body),
                                        "at": time.monotonic()})
            self.send_response(state.status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook/{uuid.uuid4().hex[:6]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()


def subscription(criteria: str, endpoint: str, content: str = "full-resource", **extra) -> dict:
    return {"resourceType": "Subscription", "status": "requested", "reason": "connector test",
            "criteria": criteria,
            "channel": {"type": "rest-hook", "endpoint": endpoint, "payload": "application/fhir+json",
                        "_payload": {"extension": [{
                            "url": "http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/"
                                   "backport-payload-content", "valueCode": content}]},
                        **extra}}


@contextmanager
def live_with_changes(url: str, bus, topic: str) -> Iterator[tuple]:
    """A live API on `url` whose writes reach `topic` on `bus` through the outbox (in-process relay)."""
    from rounds.settings import Settings
    from services.fhir_api.app import create_app
    from services.fhir_api.backbone.wiring import BackboneSettings, install_event_backbone
    from tests.fhir_api.conftest import start_live
    from tests.wiring import store_on

    settings = Settings(database_url=url)
    store = store_on(url)
    app = create_app(settings, store)
    install_event_backbone(app, settings, bus=bus, backbone=BackboneSettings(record_interactions=False),
                           changes_topic=topic)
    api, server, thread = start_live(app, store)
    try:
        yield api, store
    finally:
        server.should_exit = True
        thread.join(timeout=10)
