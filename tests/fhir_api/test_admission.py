"""Admission control (services/fhir_api/http/admission.py): at most N requests in progress per event loop,
the rest wait first come, first served; 0 turns it off; the real app serves through it."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from starlette.middleware.cors import CORSMiddleware

from rounds.settings import Settings
from services.fhir_api.http.admission import Admission
from services.fhir_api.http.errors import CatchAll
from services.fhir_api.http.interactions import InteractionMiddleware
from services.fhir_api.http.request_limits import RequestLimits
from tests.wiring import app_on


class Recorder:
    """An ASGI app whose requests start, wait to be released one by one, and finish; records the order."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.in_progress = 0
        self.most_at_once = 0
        self.release: asyncio.Queue[None] = asyncio.Queue()

    async def __call__(self, scope, receive, send) -> None:
        self.started.append(scope["path"])
        self.in_progress += 1
        self.most_at_once = max(self.most_at_once, self.in_progress)
        await self.release.get()
        self.in_progress -= 1
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": scope["path"].encode()})


async def _serve(limit: int | None, n: int) -> Recorder:
    inner = Recorder()
    app = Admission(inner, limit)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        tasks = []
        for i in range(n):
            tasks.append(asyncio.create_task(client.get(f"/r{i}")))
            await asyncio.sleep(0.01)  # arrival order r0, r1, ...
        while any(not t.done() for t in tasks):
            inner.release.put_nowait(None)
            await asyncio.sleep(0.01)
        bodies = [(await t).text for t in tasks]
    assert bodies == [f"/r{i}" for i in range(n)]  # everyone was answered, each its own response
    return inner


def test_at_most_limit_in_progress_and_the_rest_served_in_arrival_order() -> None:
    inner = asyncio.run(_serve(2, 7))
    assert inner.most_at_once == 2
    assert inner.started == [f"/r{i}" for i in range(7)]


def test_zero_means_no_limit() -> None:
    inner = asyncio.run(_serve(0, 6))
    assert inner.most_at_once == 6


def test_the_app_serves_through_the_gate(sqlite_url) -> None:
    from rounds.migrate import upgrade

    upgrade(sqlite_url)
    app = app_on(Settings(database_url=sqlite_url, api_concurrency=1))
    gates = [m for m in app.user_middleware if m.cls is Admission]
    assert len(gates) == 1 and gates[0].kwargs["limit"] == 1
    # the interaction hook outside, admission right inside it: queued requests hold nothing else (only the
    # request limits, the catch-all of http/errors.py and CORS — which answers a browser's preflight before
    # any gate, as it must come before auth — wrap them)
    order = [m.cls for m in app.user_middleware]
    assert order[:5] == [CORSMiddleware, CatchAll, RequestLimits, InteractionMiddleware, Admission]

    async def many() -> list[int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            answers = await asyncio.gather(*(client.get("/fhir/metadata") for _ in range(5)))
        return [a.status_code for a in answers]

    assert asyncio.run(many()) == [200] * 5


class BlockingGate:
    """A gate listener (like the event recorder) that holds the exchanges it wants until released."""

    before_response = True

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    @staticmethod
    def wants(method: str, path: str) -> bool:
        return path == "/fhir/metadata"

    async def __call__(self, interaction) -> None:
        self.entered.set()
        await self.release.wait()


def test_a_response_held_for_recording_does_not_hold_an_admission_slot(sqlite_url) -> None:
    from rounds.migrate import upgrade

    upgrade(sqlite_url)
    app = app_on(Settings(database_url=sqlite_url, api_concurrency=1))  # one request at a time
    gate = BlockingGate()
    app.state.interaction_listeners.append(gate)

    async def scenario() -> tuple[int, int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            held = asyncio.create_task(client.get("/fhir/metadata"))
            await asyncio.wait_for(gate.entered.wait(), 30)  # its response is being "recorded"
            other = await asyncio.wait_for(client.get("/health"), 30)  # the only slot is free
            assert not held.done()
            gate.release.set()
            return (await held).status_code, other.status_code

    assert asyncio.run(scenario()) == (200, 200)


def test_negative_limit_is_rejected() -> None:
    with pytest.raises(ValueError, match="api_concurrency"):
        Settings(api_concurrency=-1)
