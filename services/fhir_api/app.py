"""FastAPI app factory: the FHIR router at /fhir and /sessions/{id}/fhir, the sessions API, error handling."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from anyio import to_thread
from fastapi import FastAPI
from sqlalchemy import Engine
from sqlalchemy.pool import QueuePool

from rounds.settings import Settings
from services.fhir_api.auth import install_auth
from services.fhir_api.http import health, routes, sessions
from services.fhir_api.http.admission import Admission
from services.fhir_api.http.cors import install_cors
from services.fhir_api.http.errors import CatchAll, install_error_handlers
from services.fhir_api.http.fastlane import FastLane
from services.fhir_api.http.interactions import InteractionListener, InteractionMiddleware
from services.fhir_api.http.openapi import install_openapi
from services.fhir_api.http.request_limits import RequestLimits
from services.fhir_api.store.interface import ResourceStore
from services.fhir_api.subscriptions.endpoints import EndpointPolicy
from services.fhir_api.subscriptions.numbering import EventNumbers

DESCRIPTION = """FHIR R4 REST API over the Rounds record.

* `/fhir` — the shared record.
* `/sessions/{session_id}/fhir` — a copy-on-write sandbox with an as-of clock (`POST /sessions` opens one).

Bodies are `application/fhir+json`; every error is an OperationOutcome.
"""


def worker_threads(store: ResourceStore, configured: int | None = None) -> int | None:
    """Threads that may run store operations at once: `configured` (ROUNDS_API_THREADS, `serve --threads`),
    at most the connection pool's steady size, which is the default. More threads than pooled connections
    open and close an overflow connection per request (a backend started and torn down by the database
    server each time). Fewer can be better on few cores: requests beyond them wait in anyio's FIFO queue
    instead of contending for the GIL, which no fairness rule governs."""
    engine = getattr(store, "engine", None)
    pool = getattr(engine, "pool", None)
    steady = pool.size() if isinstance(pool, QueuePool) and engine.dialect.name == "postgresql" else None
    if configured is not None and configured < 1:
        raise ValueError(f"api threads must be at least 1, not {configured}")
    return min(configured, steady) if configured and steady else configured or steady


def create_app(
    settings: Settings,
    store: ResourceStore,
    *,
    max_body_bytes: int | None = None,
    fast_lane: bool = True,
    event_numbers: EventNumbers | None = None,
) -> FastAPI:
    """Build the API on `store` (on the process's one engine, made by the composition root, which the event
    backbone and access control share). `fast_lane=False` sends reads and searches through FastAPI's routing
    too (the tests compare both). `max_body_bytes`: default the settings' (ROUNDS_MAX_BODY_BYTES).
    `event_numbers`: the Subscriptions' event numbers `$status` reports, default on the store's engine (where
    the delivering consumer keeps them)."""
    max_body_bytes = max_body_bytes or settings.max_body_bytes
    threads = worker_threads(store, settings.api_threads)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if threads:
            to_thread.current_default_thread_limiter().total_tokens = threads
        yield
        await store.close_async()

    app = FastAPI(
        title="Rounds FHIR R4 API",
        version="0.1.0",
        description=DESCRIPTION,
        docs_url="/docs",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.store = store
    app.state.max_body_bytes = max_body_bytes
    listeners: list[InteractionListener] = []
    app.state.interaction_listeners = listeners
    # what this deployment refuses at the write (422), beyond R4 validation: a Subscription whose endpoint
    # or headers the delivering consumer may never send (the operator's policy, subscriptions/endpoints.py)
    policy = EndpointPolicy.of(settings.subscription_endpoints, settings.subscription_headers)
    app.state.write_checks = {"Subscription": policy.check_write}
    app.state.event_numbers = event_numbers or EventNumbers(store.engine)  # type: ignore[attr-defined]
    app.state.health_checks = {}  # name -> () -> (healthy, details): GET /health (http/health.py)
    install_error_handlers(app)
    install_openapi(app)  # the complete description, from http/openapi.json
    app.include_router(routes.router, prefix="/fhir", tags=["FHIR (shared record)"])
    app.include_router(routes.router, prefix="/sessions/{session_id}/fhir", tags=["FHIR (session sandbox)"])
    app.include_router(sessions.router)
    app.include_router(health.router)
    if fast_lane:
        app.add_middleware(FastLane)  # inside the interaction hook: it sees every exchange the same way
    app.add_middleware(CatchAll)  # a bug's 500 is an ordinary response to the layers outside: recorded
    install_auth(app, settings, store, max_body_bytes)  # ROUNDS_AUTH=on: outside the fast lane
    app.add_middleware(Admission, limit=settings.api_concurrency)
    # Outside admission: a response held for recording has left its admission slot (http/interactions.py).
    app.add_middleware(InteractionMiddleware, listeners=lambda: app.state.interaction_listeners)
    app.add_middleware(RequestLimits)  # outside everything: an over-long URL or head costs nothing more
    app.add_middleware(CatchAll)  # and a fault in those layers themselves: the connection stays usable
    install_cors(app, settings)  # outermost: a preflight carries no token; every answer (a 401 too) is read
    return app


def app_on_engine(settings: Settings, engine: Engine, **options: Any) -> FastAPI:
    """`create_app` on the SQL store of the process's `engine`, its statements bounded by the settings'
    ROUNDS_QUERY_TIMEOUT_MS: what a process that serves the API in-process (the simulator, the scorer, the
    scenario builder) hands it."""
    from services.fhir_api.store import open_store

    return create_app(settings, open_store(engine, query_timeout_ms=settings.query_timeout_ms), **options)
