"""`rounds feed`: replay a stay as a feed by moving a session's as-of clock through time.

From `start` to `end`, at `speed` (clinical seconds per real second), the clock advances a tick at a time
(the store's `set_session_clock`); after each tick, what the session sees newly within the feed's scope is
announced on `rounds.fhir-changes` as `rounds.fhir.resource.known` events keyed by the session (so one
session's announcements are totally ordered), within a tick in clinical order. Which resources appear when is
the store's as-of rule: the feed only compares what the session's searches answer before and after.

The scope is what the session's live Subscriptions ask for (their criteria) plus `types` (narrowed to
`patient` when given), so the delivering consumer notifies exactly the Subscriptions that care. Event ids are
derived from (session, type, id, version): a feed run again announces the same events, which receivers
deduplicate. The clock is moved before the tick's events are published, so a receiver reading the focus on
the session's base finds it. `taps` see the same clock moves (`prime` at the start, `tick` after each move):
the HL7 v2 feed (services/fhir_api/hl7/stay.py) is one.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

import orjson

from events.bus import Bus
from events.catalog import CATALOG
from events.payloads import FhirResourceKnown
from events.topics import FHIR_CHANGES
from services.fhir_api.auth.compartment import narrowing
from services.fhir_api.store.cursor import pages
from services.fhir_api.store.interface import Context, InvalidSearch, ResourceStore, StoredResource
from services.fhir_api.store.known_time import clinical_time
from services.fhir_api.store.rows import instant
from services.fhir_api.subscriptions.lookup import live_subscriptions

SOURCE = "/rounds/feed"
NAMESPACE = uuid.UUID("0b6f3c1e-2d4a-4f7b-8e9c-5a1d2c3b4e5f")
Scope = tuple[str, tuple[tuple[str, str], ...]]


class FeedError(ValueError):
    """A feed that cannot run (no such session, a window that goes backwards, a bad speed)."""


class Tap(Protocol):
    """Something else fed by the clock moves (an HL7 v2 interface): it reads the session's view itself."""

    def prime(self, ctx: Context) -> None: ...

    def tick(self, ctx: Context) -> int: ...


@dataclass
class FeedReport:
    ticks: int = 0
    announced: int = 0


def parse_speed(text: str) -> float:
    """'60x' or '60' -> 60 clinical seconds per real second."""
    try:
        speed = float(text.lower().removesuffix("x"))
    except ValueError as exc:
        raise FeedError(f"speed must be like 60x, not {text!r}") from exc
    if speed <= 0:
        raise FeedError("speed must be positive")
    return speed


def scopes(store: ResourceStore, session: str, ctx: Context, types: list[str], patient: str | None
           ) -> list[Scope]:
    found: list[Scope] = [(s.resource_type, s.params) for s in live_subscriptions(store, ctx, session)]
    for rtype in types:
        found.append((rtype, (narrowing(rtype, patient),) if patient else ()))
    return list(dict.fromkeys(found))


def visible(store: ResourceStore, ctx: Context, scope: list[Scope]) -> dict[tuple[str, str], StoredResource]:
    seen: dict[tuple[str, str], StoredResource] = {}
    for rtype, params in scope:
        try:
            for page in pages(store, ctx, rtype, list(params)):
                for stored in page:
                    seen[(stored.resource_type, stored.id)] = stored
        except InvalidSearch:
            continue  # a Subscription's criteria the search refuses: it is `error` (delivery.py), none match
    return seen


def _order(stored: StoredResource) -> tuple:
    when = clinical_time(orjson.loads(stored.raw))
    return (when if when is not None else 0, stored.resource_type, stored.id)


def announce(bus: Bus, session: str, clock: datetime, new: list[StoredResource], topic: str = FHIR_CHANGES
             ) -> None:
    items = []
    for stored in sorted(new, key=_order):
        data = FhirResourceKnown(resource_type=stored.resource_type, id=stored.id,
                                 version_id=str(stored.version_id), known_at=instant(clock))
        event_id = uuid.uuid5(NAMESPACE, f"{session}/{stored.resource_type}/{stored.id}/{stored.version_id}")
        event = CATALOG.make(FhirResourceKnown.TYPE, data, source=SOURCE, subject=session,
                             id=event_id.hex)
        items.append((session, event))
    if items:
        bus.publish_many(topic, items)


def feed(store: ResourceStore, bus: Bus, session: str, start: datetime, end: datetime, speed: float, *,
         tick_s: float = 0.5, types: list[str] | None = None, patient: str | None = None,
         sleep: Callable[[float], None] = time.sleep, topic: str = FHIR_CHANGES,
         taps: Sequence[Tap] = ()) -> FeedReport:
    """Move the session's clock from `start` to `end` (see the module docstring)."""
    if end <= start:
        raise FeedError("--to must be after --from")
    if store.get_session(session) is None:
        raise FeedError(f"no session {session}")
    report = FeedReport()
    clock = start
    store.set_session_clock(session, clock)
    ctx = Context(session, clock)
    seen = visible(store, ctx, scopes(store, session, ctx, types or [], patient))
    for tap in taps:
        tap.prime(ctx)
    step = timedelta(seconds=tick_s * speed)
    while clock < end:
        sleep(tick_s)
        clock = min(end, clock + step)
        store.set_session_clock(session, clock)
        ctx = Context(session, clock)
        now = visible(store, ctx, scopes(store, session, ctx, types or [], patient))
        new = [stored for key, stored in now.items() if key not in seen]
        announce(bus, session, clock, new, topic)
        seen = now
        for tap in taps:
            tap.tick(ctx)
        report.ticks += 1
        report.announced += len(new)
    return report
