"""Admission control: at most N requests of a worker process in progress at once, the rest wait in FIFO order.

On an event loop every request in progress takes turns at the CPU with every other one (and their database
backends with each other in the kernel), so under load a request's latency grows with how many are in
progress times its own cost: processor sharing, which stretches the slowest requests most. With a few
in progress at once (enough to keep the CPU busy while some wait on the database) and the rest queued first
come, first served, a request waits for those ahead of it and then runs nearly alone -- the way a servlet
container's fixed thread pool behaves in front of HAPI FHIR.

Measured with benchmarks/bench_fhir_api.py (16 clients, 2 workers, PostgreSQL on the same 2 cores, 20 s runs
alternating on a quiet machine): p99 41.0-52.0 ms (median of four 48.5) with 2 at once per worker, 51.9-53.4
with 3, 52.6-58.4 with 4, 58.9-63.9 with no limit, at 1,000-1,200 requests/s throughout. With a remote
database a request waits longer on its round trips and more at once keep the worker busy: raise the limit.
"""

from __future__ import annotations

import asyncio
import weakref

from starlette.types import ASGIApp, Receive, Scope, Send


class Admission:
    """ASGI middleware: `limit` HTTP requests at once per event loop (None or 0: no limit). A request holds
    its place until its response is sent (a slow reader holds it too, as it would hold a servlet thread)."""

    def __init__(self, app: ASGIApp, limit: int | None) -> None:
        self.app, self.limit = app, limit
        self._gates: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # event loop -> semaphore

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.limit or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        gate = self._gates.get(loop)
        if gate is None:
            gate = self._gates[loop] = asyncio.Semaphore(self.limit)  # waiters are woken in FIFO order
        async with gate:
            await self.app(scope, receive, send)
