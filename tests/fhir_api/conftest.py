"""A live FHIR API (uvicorn on a free port, real SQL store) shared by the HTTP tests of this folder."""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from rounds.migrate import upgrade
from rounds.settings import Settings
from services.fhir_api.app import create_app
from services.fhir_api.http.protocol import uvicorn_options
from services.fhir_api.store.interface import ResourceStore
from tests.wiring import store_on


@dataclass
class LiveApi:
    root: str  # http://127.0.0.1:<port>
    app: FastAPI
    store: ResourceStore

    @property
    def fhir(self) -> str:
        return f"{self.root}/fhir"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_live(app: FastAPI, store: ResourceStore) -> tuple[LiveApi, uvicorn.Server, threading.Thread]:
    port = free_port()
    server = uvicorn.Server(  # proxy headers are the app's to judge, as under `rounds serve` (forwarded.py)
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False,
                       proxy_headers=False, **uvicorn_options())
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    return LiveApi(f"http://127.0.0.1:{port}", app, store), server, thread


def live_api(database_url: str, **app_kwargs) -> Iterator[LiveApi]:
    upgrade(database_url)
    store = store_on(database_url)
    app = create_app(Settings(database_url=database_url), store, **app_kwargs)
    api, server, thread = start_live(app, store)
    yield api
    server.should_exit = True
    thread.join(timeout=10)


@contextmanager
def secured_api(url: str, **settings: Any) -> Iterator[LiveApi]:
    """The FHIR API with access control on, over real HTTP on `url` (SQLite or PostgreSQL)."""
    upgrade(url)
    store = store_on(url)
    app = create_app(Settings(database_url=url, auth=True, **settings), store)
    api, server, thread = start_live(app, store)
    try:
        yield api
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        store.engine.dispose()


@pytest.fixture(scope="session")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveApi]:
    """The API on a SQLite store, 64 KiB body limit (so 413 is cheap to provoke)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('fhir-api') / 'api.sqlite'}"
    yield from live_api(url, max_body_bytes=64 * 1024)


@pytest.fixture
def client(api: LiveApi) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api.fhir, timeout=120, headers={"Accept": "application/fhir+json"}) as c:
        yield c


@pytest.fixture
def tag() -> str:
    """A unique identifier value so tests sharing the live store never see each other's resources."""
    return uuid.uuid4().hex[:12]


def patient(tag: str, family: str = "Doe", **extra) -> dict:
    return {
        "resourceType": "Patient",
        "identifier": [{"system": "urn:test", "value": tag}],
        "name": [{"family": family, "given": ["Pat"]}],
        "gender": "female",
        **extra,
    }


def observation(patient_id: str, code: str, when: str, value: float = 1.0) -> dict:
    return {
        "resourceType": "Observation",
        "status": "final",
        "code": {"coding": [{"system": "http://loinc.org", "code": code}]},
        "subject": {"reference": f"Patient/{patient_id}"},
        "effectiveDateTime": when,
        "valueQuantity": {
            "value": value,
            "unit": "mg/dL",
            "system": "http://unitsofmeasure.org",
            "code": "mg/dL",
        },
    }


def assert_outcome(response: httpx.Response, status: int) -> dict:
    """The response has `status` and an OperationOutcome body with at least one issue."""
    assert response.status_code == status, response.text
    body = response.json()
    assert body["resourceType"] == "OperationOutcome", body
    assert body["issue"] and all(i["severity"] and i["code"] for i in body["issue"])
    return body


def token_claims(token: str) -> dict:
    """The claims of a JWT, unverified: what a client reads from the token it was given."""
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
