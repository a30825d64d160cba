"""HL7 v2 fixtures: the real MIMIC-IV demo admission of tests/fhir_api/subscriptions (patient, stay,
transfers, labs)
loaded into a SQLite store once per module, and an MLLP receiver written with python-hl7 (a second library:
its asyncio MLLP server and parser), which the tests can make lose an ACK, NAK, or restart."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import hl7
import orjson
import pytest
from hl7.mllp import start_hl7_server

from rounds.migrate import upgrade
from tests.fhir_api.subscriptions.conftest import admission_ndjson  # noqa: F401 - the fixture, shared
from tests.wiring import load_on, store_on

PATIENT_OF_ADMISSION = "cb70e6ae-90b1-562b-8ab0-467c65d18d5e"  # HADM 29600294's patient (subject 10014354)


@pytest.fixture(scope="module")
def admission_store(admission_ndjson: Path, tmp_path_factory):  # noqa: F811 - pytest's fixture injection
    url = f"sqlite:///{tmp_path_factory.mktemp('hl7') / 'rounds.sqlite'}"
    upgrade(url)
    assert load_on(url, admission_ndjson, workers=1).errors == 0
    store = store_on(url)
    with (admission_ndjson / "MimicObservationLabevents.ndjson").open("rb") as labs:
        assert orjson.loads(labs.readline())["subject"]["reference"] == f"Patient/{PATIENT_OF_ADMISSION}"
    yield url, store
    store.engine.dispose()


@dataclass
class Received:
    control: str
    trigger: str
    text: str
    clock: object  # the session's clock when the message arrived


@dataclass
class Hl7Receiver:
    """python-hl7's MLLP server on a fixed loopback port. `misbehave(n)` may answer the n-th receipt
    (1-based) with 'drop' (no ACK, connection closed), 'AE' (a NAK) or 'restart' (the server goes away,
    connections closed, and comes back on the same port after `down_s`); otherwise AA."""

    clock_of: Callable[[], object]
    misbehave: Callable[[int], str | None] = lambda n: None
    down_s: float = 0.5
    port: int = 0
    received: list[Received] = field(default_factory=list)
    restarts: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _server: asyncio.AbstractServer | None = None
    _writers: list = field(default_factory=list)

    async def _handle(self, reader, writer) -> None:
        self._writers.append(writer)
        try:
            while not writer.is_closing():
                message = await reader.readmessage()
                msh = message.segment("MSH")
                self.received.append(Received(str(msh(10)), str(msh(9)(1)(2)), str(message), self.clock_of()))
                action = self.misbehave(len(self.received))
                if action == "drop":
                    writer.close()
                    return
                if action == "restart":
                    asyncio.get_running_loop().create_task(self._restart())
                    return
                writer.writemessage(message.create_ack("AE" if action == "AE" else "AA"))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return

    async def _start(self) -> None:
        self._server = await start_hl7_server(self._handle, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _restart(self) -> None:
        self._server.close()
        for writer in self._writers:
            writer.close()
        self._writers.clear()
        await asyncio.sleep(self.down_s)
        self.restarts += 1
        await self._start()

    def unique(self) -> list[Received]:
        """First receipt of each control id, in arrival order (what a de-duplicating receiver keeps)."""
        seen: dict[str, Received] = {}
        for item in self.received:
            seen.setdefault(item.control, item)
        return list(seen.values())


@pytest.fixture
def hl7_receiver() -> Iterator[Callable[..., Hl7Receiver]]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    made: list[Hl7Receiver] = []

    def make(**options) -> Hl7Receiver:
        receiver = Hl7Receiver(_loop=loop, **options)
        asyncio.run_coroutine_threadsafe(receiver._start(), loop).result(10)
        made.append(receiver)
        return receiver

    yield make
    for receiver in made:
        if receiver._server is not None:
            loop.call_soon_threadsafe(receiver._server.close)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


def parse(text: str) -> hl7.Message:
    return hl7.parse(text)
