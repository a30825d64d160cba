"""What a test hands the components it drives, as the composition root (rounds/root.py) does for a command:
an engine made here, and a bus, FHIR app, store or loader on it. A test is its own composition root; these
keep each test's wiring one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from events.bus import Bus
from events.factory import open_bus
from foundation.db import make_engine
from rounds.root import Root
from rounds.settings import Settings


def root_on(settings: Settings) -> Root:
    """A process's root on `settings`."""
    return Root(settings)


def migrated(settings: Settings) -> Root:
    """A process's root on `settings`, its schema brought to head (as `rounds run` does before a run)."""
    return Root(settings).upgrade()


def bus_on(settings: Settings, *, ensure_topics: bool = False) -> Bus:
    """The configured bus on an engine of its own, disposed of when the bus is closed."""
    engine = make_engine(settings.database_url) if settings.bus != "kafka" else None
    bus = open_bus(settings, engine, ensure_topics=ensure_topics)
    if engine is not None:
        close = bus.close

        def closing() -> None:
            close()
            engine.dispose()

        bus.close = closing  # type: ignore[method-assign]
    return bus


def app_on(settings: Settings, **options: Any) -> FastAPI:
    """The FHIR app on the SQL store of an engine on `settings.database_url`."""
    from services.fhir_api.app import app_on_engine

    return app_on_engine(settings, make_engine(settings.database_url), **options)


def store_on(database_url: str, **options: Any):
    """The SQL store on an engine of `database_url`."""
    from services.fhir_api.store import open_store

    return open_store(make_engine(database_url), **options)


def load_on(database_url: str, folder: str | Path, **options: Any):
    """`rounds load` of `folder` into `database_url` (worker processes make their own engines)."""
    from services.fhir_api.load import load_ndjson

    engine = make_engine(database_url)
    try:
        return load_ndjson(engine, folder, engine_factory=make_engine, **options)
    finally:
        engine.dispose()


def client_on(settings: Settings) -> httpx.Client:
    """The scorer's FHIR client (a separate server's, or the in-process app on an engine of its own)."""
    from services.consumers.scoring.fhir_state import fhir_client

    return fhir_client(settings, make_engine(settings.database_url))
