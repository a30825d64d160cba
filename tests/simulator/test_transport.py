"""The session transport re-sends a read once after a dropped connection, never a write, and notes faults."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import httpx
import pytest
from fastapi import FastAPI

from services.simulator.agents.patient import PatientAgent
from services.simulator.agents.physician import Physician
from services.simulator.orchestrator.environment import FhirEnvironment
from services.simulator.orchestrator.live_session import LiveSession
from services.simulator.orchestrator.transport import SessionTransport

BASE = "http://fhir.test/sessions/s1/fhir"


class Flaky(httpx.AsyncBaseTransport):
    def __init__(self, failures: int) -> None:
        self.failures, self.calls = failures, 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        if self.calls <= self.failures:
            raise httpx.ReadError("connection closed", request=request)
        return httpx.Response(200, json={"resourceType": "Bundle"})


class NoLog:
    async def flush(self, session_id: str) -> list:
        return []


def live(scenarios) -> LiveSession:
    scenario = scenarios[0][0]
    session = LiveSession("s1", BASE, "http://fhir.test/sessions/s1/patient", scenario, "en", NoLog(),
                          Physician(scenario, "en"), PatientAgent(scenario, "en"))
    session.begin_turn(0, "d1")
    return session


def send(transport: SessionTransport, method: str) -> httpx.Response:
    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
            return await client.request(method, "Observation", **({"json": {}} if method == "POST" else {}))

    return asyncio.run(go())


def test_a_read_is_sent_once_more_after_a_dropped_connection(scenarios):
    session, inner = live(scenarios), Flaky(failures=1)
    assert send(SessionTransport(inner, session), "GET").status_code == 200
    assert inner.calls == 2 and session.faults == [] and session.steps == 1


def test_a_write_is_never_sent_twice_and_a_second_drop_is_a_fault(scenarios):
    session, inner = live(scenarios), Flaky(failures=1)
    with pytest.raises(httpx.ReadError):
        send(SessionTransport(inner, session), "POST")
    assert inner.calls == 1 and len(session.faults) == 1
    session, inner = live(scenarios), Flaky(failures=2)
    with pytest.raises(httpx.ReadError):
        send(SessionTransport(inner, session), "GET")
    assert inner.calls == 2 and len(session.faults) == 1


class Pool(httpx.AsyncBaseTransport):
    """A shared connection pool: answers POST /sessions and remembers whether anyone closed it."""

    def __init__(self) -> None:
        self.closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert not self.closed, "a request on a closed pool"
        return httpx.Response(201, json={"id": "s9", "fhirBase": "http://fhir.test/sessions/s9/fhir"})

    async def aclose(self) -> None:
        self.closed = True


def test_opening_a_session_leaves_the_runs_shared_pool_open() -> None:
    """Over TCP every session's requests share one pool: the short-lived client that opens a session must not
    close it on exit (it did, and every other session's request in flight failed with a ReadError)."""
    pool = Pool()
    env = FhirEnvironment("http://fhir.test", pool, FastAPI(), "http://fhir.test")
    assert asyncio.run(env.open_session(datetime(2150, 1, 1, tzinfo=UTC))) == (
        "s9", "http://fhir.test/sessions/s9/fhir")
    assert not pool.closed
