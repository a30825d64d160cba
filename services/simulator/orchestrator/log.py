"""The simulator's side of a session's log: its events on `rounds.sessions`, numbered per session.

The FHIR server records the assistant's EHR calls into the same session (same key, same sequence counter), so
both producers share `SessionSequences` (a counter row per session in the database). Events are queued
(`emit`, cheap and synchronous, callable from an assistant's `step`) and written in order by `flush` —
which the orchestrator awaits before anything the FHIR server will record (each proxied FHIR request) and
before each message, so the log's order is the order things happened. An event too large for the log has its
large part stored (oversize.py) when the log has a blob store.
"""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from dataclasses import dataclass

from pydantic import BaseModel

from events.blobs import BlobStore
from events.bus import Bus
from events.catalog import CATALOG, type_of
from events.envelope import CloudEvent, EventTooLarge
from events.sequences import SessionSequences
from events.topics import SESSIONS

SOURCE = "/rounds/simulator"
_IDS = random.Random()  # seeded from os.urandom once: ids need uniqueness, not secrecy (urandom per id was
# the simulator's largest single CPU cost under load)


def new_id() -> str:
    """A fresh 128-bit id as 32 hex digits (event and Communication ids)."""
    return f"{_IDS.getrandbits(128):032x}"


@dataclass(frozen=True)
class Pending:
    type: str
    data: BaseModel
    id: str
    correlationid: str | None
    causationid: str | None


class SessionRecorder:
    """Queues and publishes one run's simulator events (any number of sessions at once): the writing side of
    a session's log, which contracts/trajectory.py reads back as a Trajectory."""

    def __init__(self, bus: Bus, sequences: SessionSequences, topic: str = SESSIONS,
                 blobs: BlobStore | None = None) -> None:
        self.bus, self.sequences, self.topic, self.blobs = bus, sequences, topic, blobs
        self._pending: dict[str, list[Pending]] = defaultdict(list)
        self._locks: dict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self.published = 0

    def emit(
        self,
        session_id: str,
        data: BaseModel,
        *,
        correlationid: str | None = None,
        causationid: str | None = None,
    ) -> str:
        """Queue the event `data` is the payload of (its type is the payload's: `type_of`); returns its id
        (known before it is written, so later events can point at it)."""
        event_id = new_id()
        self._pending[session_id].append(Pending(type_of(data), data, event_id, correlationid, causationid))
        return event_id

    async def flush(self, session_id: str) -> list[CloudEvent]:
        """Write the session's queued events, in order, with consecutive sequence numbers."""
        async with self._locks[session_id]:
            items = self._pending.pop(session_id, None)
            if not items:
                return []
            return await asyncio.to_thread(self._write, session_id, items)

    async def publish(self, session_id: str, data: BaseModel, **ids: str | None) -> str:
        event_id = self.emit(session_id, data, **ids)
        await self.flush(session_id)
        return event_id

    def _write(self, session_id: str, items: list[Pending]) -> list[CloudEvent]:
        numbers = self.sequences.allocate(session_id, len(items))
        events = [self._make(session_id, item, number) for item, number in zip(items, numbers, strict=True)]
        self.bus.publish_many(self.topic, [(session_id, event) for event in events])
        self.published += len(events)
        return events

    def _make(self, session_id: str, item: Pending, number: int) -> CloudEvent:
        def make(data: BaseModel | dict) -> CloudEvent:
            return CATALOG.make(item.type, data, source=SOURCE, subject=session_id, id=item.id,
                                sequence=number, correlationid=item.correlationid,
                                causationid=item.causationid)

        event = make(item.data)
        try:
            event.to_bytes()  # serialised once and cached for publish; raises when too large
        except EventTooLarge:
            from services.simulator.orchestrator.oversize import stored

            smaller = stored(item.type, item.data.to_data(), self.blobs) if self.blobs is not None else None
            if smaller is None:
                raise
            event = make(smaller)
        return event

    def forget(self, session_id: str) -> None:
        """Drop a finished session's bookkeeping (its queue is empty once `flush` ran)."""
        self._pending.pop(session_id, None)
        self._locks.pop(session_id, None)
