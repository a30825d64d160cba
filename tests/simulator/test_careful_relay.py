"""benchmarks/careful_relay.py — the relay a person answers `http:` turns through — run as a real process: the
adapter's preflight gets 200, a turn's request lands whole in the inbox, the answer file comes back as
`{"text": ...}` and moves to `sent/`, a turn nobody answers is a 504 and a body that is not a turn a 400."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from services.simulator.orchestrator.environment import free_port

RELAY = Path(__file__).resolve().parents[2] / "benchmarks" / "careful_relay.py"
TURN = {"session": "s1/../x", "turn": 2, "message": "What's the K?", "language": "en",
        "fhirBase": "http://127.0.0.1:1/fhir", "patientUrl": "http://127.0.0.1:1/patient", "history": []}


@pytest.fixture()
def relay(tmp_path: Path) -> Iterator[tuple[str, Path, Path]]:
    port = free_port()
    inbox, outbox = tmp_path / "in", tmp_path / "out"
    proc = subprocess.Popen([sys.executable, str(RELAY), "--port", str(port), "--inbox", str(inbox),
                             "--outbox", str(outbox), "--wait", "3"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/turn"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.head(url, timeout=1)
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(proc.stderr.read() if proc.stderr else "relay did not start") from None
                time.sleep(0.1)
        yield url, inbox, outbox
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def answer_when_asked(inbox: Path, outbox: Path, text: str) -> threading.Thread:
    """Plays the person at the keyboard: waits for the request file, then writes the answer file."""

    def run() -> None:
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            requests = list(inbox.glob("*.json"))
            if requests:
                (outbox / requests[0].name.replace(".json", ".txt")).write_text(text, encoding="utf-8")
                return
            time.sleep(0.05)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_preflight_head_is_answered(relay: tuple[str, Path, Path]) -> None:
    url, _, _ = relay
    assert httpx.head(url).status_code == 200


def test_a_turn_is_written_to_the_inbox_and_the_answer_file_returned(relay: tuple[str, Path, Path]) -> None:
    url, inbox, outbox = relay
    person = answer_when_asked(inbox, outbox, "  K 4.1 mEq/L (12/18 07:32).\n")
    response = httpx.post(url, json=TURN, timeout=10)
    person.join()
    assert response.status_code == 200
    assert response.json() == {"text": "K 4.1 mEq/L (12/18 07:32)."}
    request_file = inbox / "s1_.._x--2.json"  # the session id is made safe for a file name
    assert json.loads(request_file.read_text(encoding="utf-8")) == TURN
    assert not (outbox / "s1_.._x--2.txt").exists()
    assert (outbox / "sent" / "s1_.._x--2.txt").exists()


def test_a_turn_nobody_answers_is_a_504_naming_it(relay: tuple[str, Path, Path]) -> None:
    url, _, _ = relay
    response = httpx.post(url, json={**TURN, "turn": 3}, timeout=10)
    assert response.status_code == 504
    assert "s1_.._x--3" in response.json()["error"]


def test_a_body_that_is_not_a_turn_is_a_400(relay: tuple[str, Path, Path]) -> None:
    url, _, _ = relay
    assert httpx.post(url, content=b"not json", timeout=10).status_code == 400
    assert httpx.post(url, json={"session": "s"}, timeout=10).status_code == 400
