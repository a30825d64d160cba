"""Simulator fixtures: a small hand-written patient record loaded into a fresh store, and its scenarios.

Until the scenario builder lands, the scenarios are JSON fixtures valid against the data model
(tests/simulator/fixtures/scenarios.jsonl) over the synthetic record in fixtures/record.json.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rounds.settings import Settings
from services.simulator.orchestrator.jobs import plan, read_scenarios

FIXTURES = Path(__file__).parent / "fixtures"
SCENARIOS = FIXTURES / "scenarios.jsonl"


@pytest.fixture
def settings(record_url: str) -> Settings:
    return Settings(database_url=record_url)


@pytest.fixture
def scenarios():
    return read_scenarios(SCENARIOS)


def jobs(lines, trials: int = 1, languages=("en",), variant: str = "implicit"):
    return plan(lines, trials, languages, variant)


def session_events(settings: Settings, session_id: str) -> list:
    """The session's events in log order (its partition of rounds.sessions)."""
    from events.archive import read_log
    from tests.wiring import bus_on

    bus = bus_on(settings)
    try:
        return [record.event for record in read_log(bus, ["rounds.sessions"], session=session_id)]
    finally:
        bus.close()


def assert_session_order(events: list, turns: int) -> None:
    """started; per turn the doctor's message, the assistant's work, its answer in response; ended — with the
    session's sequence numbers increasing in log order."""
    from events.payloads import Communication

    assert [e.sequence for e in events] == sorted(e.sequence for e in events)
    assert len({e.sequence for e in events}) == len(events)
    assert events[0].type == "rounds.session.started" and events[-1].type == "rounds.session.ended"
    assert all(e.type not in ("rounds.session.started", "rounds.session.ended") for e in events[1:-1])
    turn, doctor_id = -1, None
    for event in events[1:-1]:
        if event.type.startswith("rounds.message."):
            message = Communication.model_validate(event.data)
            if event.type == "rounds.message.doctor" and message.kind == "request":
                assert message.turn == turn + 1 and doctor_id is None, "turn opened too soon"
                turn, doctor_id = message.turn, message.id
                continue
            assert message.turn == turn and doctor_id is not None
            if event.type == "rounds.message.assistant" and message.kind == "answer":
                assert [r.reference for r in message.inResponseTo] == [f"Communication/{doctor_id}"]
                doctor_id = None
        else:
            assert doctor_id is not None, f"{event.type} outside a turn"
    assert turn == turns - 1 and doctor_id is None
