"""A small synthetic record loaded into a real store, its FHIR app, and the SessionTools an assistant gets.

The patient is made the way `rounds demo` makes one (synth → map → load), so the adapters search real
MIMIC-shaped FHIR; sessions are opened through the sessions API and the assistant's calls go through the app
over HTTP (in-process transport, or a real port when another process or SDK must reach it).
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import uvicorn

from fhir_mapper.pipeline import run_map
from fhir_mapper.synth.generate import generate
from rounds.migrate import upgrade
from rounds.settings import Settings
from services.fhir_api.app import create_app
from services.simulator.assistant_protocol import SessionTools, TurnRequest
from tests.wiring import load_on, store_on


@dataclass(frozen=True)
class Record:
    database_url: str
    patient: str  # Patient id
    lab_code: str  # "system|code" of one of the patient's labs
    lab_id: str
    lab_value: Any  # its valueQuantity.value or valueString


def _first_lab(fhir_dir: Path) -> dict:
    with (fhir_dir / "MimicObservationLabevents.ndjson").open("rb") as fh:
        for line in fh:
            obs = orjson.loads(line)
            value = (obs.get("valueQuantity") or {}).get("value", obs.get("valueString"))
            if obs.get("subject") and value is not None:
                return obs
    raise RuntimeError("no lab with a value was mapped")


@pytest.fixture(scope="session")
def record(tmp_path_factory: pytest.TempPathFactory) -> Record:
    work = tmp_path_factory.mktemp("adapters-record")
    generate(work / "mimic", 1, 11)
    run_map(work / "mimic", work / "fhir")
    url = f"sqlite:///{work / 'rounds.sqlite'}"
    upgrade(url)
    load_on(url, work / "fhir", workers=1)
    lab = _first_lab(work / "fhir")
    coding = lab["code"]["coding"][0]
    return Record(
        database_url=url,
        patient=lab["subject"]["reference"].split("/")[-1],
        lab_code=f"{coding['system']}|{coding['code']}",
        lab_id=lab["id"],
        lab_value=(lab.get("valueQuantity") or {}).get("value", lab.get("valueString")),
    )


@pytest.fixture(scope="session")
def fhir_app(record: Record):
    return create_app(Settings(database_url=record.database_url), store_on(record.database_url))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """An ASGI app on a real port in a thread (uvicorn runs its lifespan), stopped by `stop`."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        self.root = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@dataclass
class Recorder:
    """Stands in for the orchestrator's step/result: what the adapter recorded, in order."""

    calls: list[tuple[str, str, dict]] = field(default_factory=list)  # (call id, name, arguments)
    results: list[dict] = field(default_factory=list)
    questions: list[str] = field(default_factory=list)
    model_calls: list[dict] = field(default_factory=list)  # calls recorded on their own (no tool result)
    patient_reply: str = "I take my pills every morning."
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def step(self, name: str, arguments: dict) -> str:
        call_id = f"c{next(self._ids)}"
        self.calls.append((call_id, name, arguments))
        return call_id

    def model_call(self, outcome: str, usage: dict, error: str | None = None) -> None:
        self.model_calls.append({"outcome": outcome, "usage": usage, "error": error})

    def accounted(self) -> int:
        """Model calls recorded: on a tool result or on their own."""
        return sum(1 for r in self.results if r["usage"] is not None) + len(self.model_calls)

    def result(self, call_id, name, output=None, error=None, latency_ms=None, usage=None) -> None:
        self.results.append(
            {
                "call_id": call_id,
                "name": name,
                "output": output,
                "error": error,
                "latency_ms": latency_ms,
                "usage": usage,
            }
        )

    async def ask_patient(self, text: str) -> str:
        self.questions.append(text)
        return self.patient_reply


@dataclass
class Sandbox:
    """One open session: its id, FHIR base as the app names it, and a way to build the turn's tools."""

    app: Any
    session_id: str
    fhir_base: str
    record: Record

    def client(self) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=self.app)
        return httpx.AsyncClient(transport=transport, base_url=self.fhir_base, timeout=30)

    def tools(
        self,
        recorder: Recorder,
        http: httpx.AsyncClient | None = None,
        ask_physician: Callable[[str], Awaitable[str]] | None = None,
    ) -> SessionTools:
        return SessionTools(
            http=http or self.client(),
            ask_patient=recorder.ask_patient,
            step=recorder.step,
            result=recorder.result,
            model_call=recorder.model_call,
            ask_physician=ask_physician,
        )

    def request(self, message: str, **overrides: Any) -> TurnRequest:
        base = dict(
            session_id=self.session_id,
            run_id="run-test",
            turn=0,
            message=message,
            language="en",
            history=(),
            fhir_base=self.fhir_base,
            patient_url=f"{self.fhir_base[:-5]}/patient",
            patient=f"Patient/{self.record.patient}",
            now="2300-01-01T00:00:00Z",
        )
        return TurnRequest(**(base | overrides))


@pytest.fixture
def sandbox(fhir_app, record: Record) -> Sandbox:
    return open_sandbox(fhir_app, record)


def open_sandbox(app: Any, record: Record, root: str = "http://rounds.test") -> Sandbox:
    """A new session on `app` (no clock: the whole synthetic record is visible)."""

    async def post() -> dict:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=root) as client:
            response = await client.post("/sessions", json={})
            assert response.status_code == 201, response.text
            return response.json()

    session = asyncio.run(post())
    return Sandbox(app, session["id"], session["fhirBase"], record)
