"""Recording FHIR interactions as events, and the one call that wires the event backbone into the FHIR API.

The FHIR app calls every callable in `app.state.interaction_listeners` with an `Interaction`
(services/fhir_api/http/interactions.py) after each request. `InteractionRecorder` turns an interaction made
through a session base (`/sessions/<id>/fhir`) into `rounds.ehr.request` then `rounds.ehr.response` on
`rounds.sessions`, keyed by the session id, with per-session `sequence` numbers from `SessionSequences` (a
counter row per session in the database, so every producer and every API worker shares one sequence).
The response's `causationid` is the request event's id; both carry the request id as `correlationid`.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import parse_qs

from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy import BigInteger, Engine, String, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, mapped_column

from events.bus import Bus
from events.catalog import CATALOG
from events.outbox import OutboxListener
from events.payloads import EhrRequest, EhrResponse
from events.relay import Relay, RelayThread
from events.topics import FHIR_CHANGES, SESSIONS, topic_specs
from rounds.db import Base, make_engine
from rounds.settings import Settings, get_settings

if TYPE_CHECKING:
    from fastapi import FastAPI

    from services.fhir_api.http.interactions import Interaction

log = logging.getLogger(__name__)
SOURCE = "/rounds/fhir/sessions"
RECORDED_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"})
_HEX_DIGEST = re.compile(r"^(sha256:)?([0-9a-f]{64})$")
_SESSION_BASE = re.compile(r"^/sessions/[^/]+/fhir/?")


class SessionSequence(Base):
    """The last `sequence` handed out for a session's events."""

    __tablename__ = "event_session_sequences"

    session_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    last_sequence: Mapped[int] = mapped_column(BigInteger)


SEQUENCES = SessionSequence.__table__


class SessionSequences:
    """Allocates per-session, strictly increasing event sequence numbers (1, 2, ...), atomically in the DB."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def allocate(self, session_id: str, count: int = 1) -> list[int]:
        for _attempt in range(5):
            with self.engine.begin() as conn:
                last = conn.execute(
                    update(SEQUENCES)
                    .where(SEQUENCES.c.session_id == session_id)
                    .values(last_sequence=SEQUENCES.c.last_sequence + count)
                    .returning(SEQUENCES.c.last_sequence)
                ).scalar_one_or_none()
                if last is None:
                    try:
                        with conn.begin_nested():
                            conn.execute(insert(SEQUENCES).values(session_id=session_id, last_sequence=count))
                        last = count
                    except IntegrityError:  # another writer created the row first: go again
                        continue
            return list(range(last - count + 1, last + 1))
        raise RuntimeError(f"could not allocate a sequence for session {session_id}")

    def last(self, session_id: str) -> int:
        with self.engine.connect() as conn:
            query = select(SEQUENCES.c.last_sequence).where(SEQUENCES.c.session_id == session_id)
            return conn.execute(query).scalar_one_or_none() or 0


def _digest(value: Any) -> str | None:
    match = _HEX_DIGEST.match(str(value)) if value else None
    return f"sha256:{match.group(2)}" if match else None


def _query(value: Any) -> dict[str, list[str]]:
    if not value:
        return {}
    if isinstance(value, str):
        return parse_qs(value.lstrip("?"), keep_blank_values=True)
    if isinstance(value, dict):
        value = [(k, x) for k, v in value.items() for x in (v if isinstance(v, list | tuple) else [v])]
    out: dict[str, list[str]] = {}
    for k, v in value:  # a list of (name, value) pairs
        out.setdefault(str(k), []).append(str(v))
    return out


class InteractionRecorder:
    """Interaction listener: publishes request + response for interactions made through a session base."""

    def __init__(self, bus: Bus, sequences: SessionSequences, topic: str = SESSIONS) -> None:
        self.bus, self.sequences, self.topic = bus, sequences, topic
        self._locks = [threading.Lock() for _ in range(64)]  # striped by session: bounded, no registry

    def events_for(self, interaction: Interaction, sequences: list[int]) -> list:
        session_id = interaction.session_id
        request_id = uuid.uuid4().hex
        relative = _SESSION_BASE.sub("", interaction.path) or "/"
        request = CATALOG.make(
            "rounds.ehr.request",
            EhrRequest(request_id=request_id, method=interaction.method.upper(), url=relative,
                       query=_query(interaction.query), body_digest=_digest(interaction.request_digest)),
            source=SOURCE, subject=session_id, sequence=sequences[0], correlationid=request_id,
        )
        response = CATALOG.make(
            "rounds.ehr.response",
            EhrResponse(request_id=request_id, status=interaction.status,
                        latency_ms=max(0.0, interaction.latency_ms),
                        body_digest=_digest(interaction.response_digest)),
            source=SOURCE, subject=session_id, sequence=sequences[1], correlationid=request_id,
            causationid=request.id,
        )
        return [request, response]

    async def __call__(self, interaction: Interaction) -> None:
        """The listener the FHIR app awaits: records off the event loop (database and broker round trips)."""
        if self.recorded(interaction):  # /fhir traffic never pays for the thread hop
            await asyncio.to_thread(self.record, interaction)

    @staticmethod
    def wants(method: str, path: str) -> bool:
        """Asked before the exchange (services/fhir_api/http/interactions.py): /fhir traffic is not teed."""
        return method.upper() in RECORDED_METHODS and _SESSION_BASE.match(path) is not None

    @staticmethod
    def recorded(interaction: Interaction) -> bool:
        """Only EHR calls made through a session's FHIR base are session events."""
        return bool(
            interaction.session_id
            and interaction.method.upper() in RECORDED_METHODS
            and _SESSION_BASE.match(interaction.path)  # e.g. GET /sessions/<id> itself: not an EHR call
        )

    def record(self, interaction: Interaction) -> None:
        if not self.recorded(interaction):
            return
        session_id = interaction.session_id
        lock = self._locks[hash(session_id) % len(self._locks)]
        try:
            # One session's interactions get sequence numbers and log positions in the same order.
            with lock:
                events = self.events_for(interaction, self.sequences.allocate(session_id, 2))
                self.bus.publish_many(self.topic, [(session_id, event) for event in events])
        except Exception:  # noqa: BLE001 - recording must never fail the FHIR request itself
            log.exception("could not record interaction %s %s", interaction.method, interaction.path)


class BackboneSettings(BaseSettings):
    """A service's event wiring: ROUNDS_OUTBOX_RELAY=in-process|off, ROUNDS_RECORD_INTERACTIONS=true|false."""

    model_config = SettingsConfigDict(env_prefix="ROUNDS_", extra="ignore")
    outbox_relay: Literal["in-process", "off"] = "in-process"
    record_interactions: bool = True


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
        if self.relay_thread is not None:
            self.relay_thread.stop()
        self.engine.dispose()


def install_event_backbone(
    app: FastAPI,
    settings: Settings | None = None,
    *,
    bus: Bus | None = None,
    backbone: BackboneSettings | None = None,
    sessions_topic: str = SESSIONS,
    changes_topic: str = FHIR_CHANGES,
) -> EventBackbone:
    """Register the outbox listener on `app.state.store`, the interaction recorder on
    `app.state.interaction_listeners`, and start the in-process relay when configured."""
    settings = settings or get_settings()
    backbone = backbone or BackboneSettings()
    if bus is None:
        from events.factory import open_bus

        bus = open_bus(settings)
    bus.ensure_topics(topic_specs(settings.kafka_partitions))
    engine = make_engine(settings.database_url)
    app.state.store.add_change_listener(OutboxListener(changes_topic))
    recorder = None
    if backbone.record_interactions:
        recorder = InteractionRecorder(bus, SessionSequences(engine), sessions_topic)
        listeners = getattr(app.state, "interaction_listeners", None)
        if listeners is None:
            listeners = app.state.interaction_listeners = []
        listeners.append(recorder)
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
