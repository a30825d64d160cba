"""Recording FHIR interactions made through a session base as `rounds.ehr.request` / `rounds.ehr.response`.

The FHIR app calls every callable in `app.state.interaction_listeners` with an `Interaction`
(services/fhir_api/http/interactions.py) after each request. `InteractionRecorder` turns an interaction made
through a session base (`/sessions/<id>/fhir`) into `rounds.ehr.request` then `rounds.ehr.response` on
`rounds.sessions`, keyed by the session id, with per-session `sequence` numbers from `SessionSequences`
(events/sequences.py: a counter row per session, so every producer and every API worker shares one sequence).
The response's `causationid` is the request event's id; both carry the request id as `correlationid`.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import uuid
from typing import Any
from urllib.parse import parse_qs

from events.bus import Bus
from events.catalog import CATALOG
from events.payloads import EhrRequest, EhrResponse
from events.sequences import SessionSequences
from events.topics import SESSIONS
from services.fhir_api.http.interactions import Interaction

log = logging.getLogger(__name__)
SOURCE = "/rounds/fhir/sessions"
RECORDED_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"})
_HEX_DIGEST = re.compile(r"^(sha256:)?([0-9a-f]{64})$")
_SESSION_BASE = re.compile(r"^/sessions/[^/]+/fhir/?")


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
