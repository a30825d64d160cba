"""`install_event_backbone(app, settings, bus)`: the one call that wires the event backbone into the FHIR app.

It registers the outbox listener on the store (FHIR writes → `rounds.fhir-changes`), the interaction recorder
on `app.state.interaction_listeners` (session interactions → `rounds.sessions`), starts the in-process relay
when configured, and closes all of it when the app's lifespan ends. `rounds serve` and `rounds demo` call it.
Everything it starts runs on the store's engine: one FHIR process, one connection pool (the composition root
made the engine, and disposes of it).
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from fastapi import FastAPI
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy import Engine

from events.blobs import BlobStore
from events.bus import Bus
from events.relay import Relay, RelayThread
from events.sequences import SessionSequences
from events.topics import FHIR_CHANGES, SESSIONS, topic_specs
from rounds.settings import Settings
from services.fhir_api.backbone.changes import OutboxListener
from services.fhir_api.backbone.recorder import InteractionRecorder


class BackboneSettings(BaseSettings):
    """A service's event wiring: ROUNDS_OUTBOX_RELAY=in-process|off, ROUNDS_RECORD_INTERACTIONS=true|false."""

    model_config = SettingsConfigDict(env_prefix="ROUNDS_", extra="ignore", use_attribute_docstrings=True)
    outbox_relay: Literal["in-process", "off"] = "in-process"
    """the FHIR API relays its outbox to the bus in a thread (`in-process`) or leaves it to `rounds events
    relay` (`off`)"""
    record_interactions: bool = True
    """the FHIR API records every exchange through a session base on `rounds.sessions` before answering it"""


@dataclass
class EventBackbone:
    bus: Bus
    engine: Engine
    recorder: InteractionRecorder | None
    relay: Relay
    relay_thread: RelayThread | None = None
    _closed: bool = field(default=False, repr=False)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.recorder is not None:
            self.recorder.close()
        if self.relay_thread is not None:
            self.relay_thread.stop()


def install_event_backbone(
    app: FastAPI,
    settings: Settings,
    *,
    bus: Bus,
    backbone: BackboneSettings,
    sessions_topic: str = SESSIONS,
    changes_topic: str = FHIR_CHANGES,
) -> EventBackbone:
    """Register the outbox listener on `app.state.store`, the interaction recorder on
    `app.state.interaction_listeners`, and start the in-process relay when `backbone` (read by the composition
    root with the settings) says so."""
    bus.ensure_topics(topic_specs(settings.kafka_partitions))
    engine = app.state.store.engine
    app.state.store.add_change_listener(OutboxListener(changes_topic))
    recorder = None
    if backbone.record_interactions:
        recorder = InteractionRecorder(bus, SessionSequences(engine), BlobStore(engine), sessions_topic)
        listeners = getattr(app.state, "interaction_listeners", None)
        if listeners is None:
            listeners = app.state.interaction_listeners = []
        listeners.append(recorder)
        checks = getattr(app.state, "health_checks", None)
        if checks is None:
            checks = app.state.health_checks = {}
        checks["event-recorder"] = recorder.health.check
    relay = Relay(engine, bus)
    wired = EventBackbone(bus=bus, engine=engine, recorder=recorder, relay=relay)
    if backbone.outbox_relay == "in-process":
        wired.relay_thread = RelayThread(relay).start()
    app.state.event_backbone = wired
    _close_on_shutdown(app, wired)
    return wired


def _close_on_shutdown(app: FastAPI, wired: EventBackbone) -> None:
    previous = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(application: Any):
        async with previous(application) as state:
            yield state
        wired.close()

    app.router.lifespan_context = lifespan
