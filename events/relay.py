"""The outbox relay: publish pending `event_outbox` rows in insertion order, then mark them sent.

Publish happens before mark, so a crash between the two re-publishes the same rows (same event ids) on the
next run: consumers drop the duplicate; nothing is ever lost. On PostgreSQL pending rows are claimed with `FOR
UPDATE SKIP LOCKED`, so several relays (one per API worker) share the work without publishing a row twice in
the normal case; on SQLite a relay claims the outbox with a lock file beside the database for the length of
one batch (events/relay_claim.py), so relays in several processes take turns. Run it with `rounds events
relay`, or in-process (`RelayThread`, started by services/fhir_api/backbone/wiring.py).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from itertools import groupby, islice

from sqlalchemy import Engine, func, select, update

from events.bus import Bus
from events.envelope import CloudEvent
from events.outbox import OUTBOX
from events.relay_claim import claim_for

log = logging.getLogger(__name__)
KNOWN_LIMIT = 100_000  # events kept for `Relay.expect` before the oldest are dropped


class Relay:
    def __init__(
        self,
        engine: Engine,
        bus: Bus,
        *,
        batch_size: int = 500,
        after_publish: Callable[[list[int]], None] | None = None,
    ) -> None:
        self.engine, self.bus, self.batch_size = engine, bus, batch_size
        self._claim = claim_for(engine)
        # Test hook: runs between publish and mark (fault tests kill the process here).
        self.after_publish = after_publish
        self._known: dict[str, CloudEvent] = {}  # event id -> an event this process committed to the outbox

    def expect(self, events: Iterable[CloudEvent]) -> None:
        """Events this process has just committed to the outbox (a projection's batch): their rows are
        published from these objects, validated when they were made, instead of parsing and validating each
        row's bytes again (~40 % of a relay's CPU). A row is still what is published: an event is used only
        when its bytes are the row's, and one never relayed here is simply parsed as before."""
        if len(self._known) > KNOWN_LIMIT:  # relayed elsewhere (another relay took the rows): stay bounded
            self._known.clear()
        self._known.update((event.id, event) for event in events)

    def expected(self) -> int:
        """Events `expect`ed and not relayed yet."""
        return len(self._known)

    def _event(self, event_id: str, payload: bytes) -> CloudEvent:
        known = self._known.pop(event_id, None)
        if known is not None and known.to_bytes() == payload:
            return known
        return CloudEvent.from_bytes(payload)

    def run_once(self, *, mine: bool = False) -> int:
        """Publish one batch of pending rows; returns how many were published. `mine`: only rows of events
        `expect`ed (this process's own commits, up to a batch of them), which need no parsing: members of one
        group each relay theirs instead of parsing and validating each other's."""
        wanted = list(islice(self._known, self.batch_size)) if mine else None
        if wanted == []:
            return 0
        with self._claim(), self.engine.begin() as conn:
            query = (
                select(OUTBOX.c.id, OUTBOX.c.topic, OUTBOX.c.key, OUTBOX.c.event_id, OUTBOX.c.payload)
                .where(OUTBOX.c.sent_at.is_(None))
                .order_by(OUTBOX.c.id)
                .limit(self.batch_size)
            )
            if wanted is not None:
                query = query.where(OUTBOX.c.event_id.in_(wanted))
            if conn.dialect.name == "postgresql":
                query = query.with_for_update(skip_locked=True)
            rows = conn.execute(query).all()
            if wanted is not None:  # no longer pending (relayed elsewhere) or never queued: forgotten
                for event_id in set(wanted) - {row.event_id for row in rows}:
                    self._known.pop(event_id, None)
            if not rows:
                return 0
            for topic, group in groupby(rows, key=lambda row: row.topic):
                items = [(row.key, self._event(row.event_id, row.payload)) for row in group]
                self.bus.publish_many(topic, items)
            ids = [row.id for row in rows]
            if self.after_publish is not None:
                self.after_publish(ids)
            conn.execute(update(OUTBOX).where(OUTBOX.c.id.in_(ids)).values(sent_at=datetime.now(UTC)))
        return len(rows)

    def drain(self, *, mine: bool = False) -> int:
        """Publish until nothing is pending (`mine`: nothing of this process's own commits)."""
        total = 0
        while (published := self.run_once(mine=mine)) or (mine and self._known):
            total += published
        return total

    def pending(self) -> int:
        with self.engine.connect() as conn:
            return conn.execute(select(func.count()).where(OUTBOX.c.sent_at.is_(None))).scalar_one()

    def run(self, stop: threading.Event, interval_s: float = 0.2) -> None:
        """Relay until `stop` is set; errors (broker down) are logged and retried, never fatal."""
        while not stop.is_set():
            try:
                published = self.drain()
            except Exception:  # noqa: BLE001 - the relay must outlive a broker or database outage
                log.exception("outbox relay failed; retrying")
                published = 0
            if not published:
                stop.wait(interval_s)


class RelayThread:
    """The relay as a daemon thread inside a service (e.g. the FHIR API)."""

    def __init__(self, relay: Relay, interval_s: float = 0.2) -> None:
        self.relay, self.interval_s = relay, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=relay.run, args=(self._stop, interval_s), name="outbox-relay",
                                        daemon=True)

    def start(self) -> RelayThread:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        self._thread.join(timeout_s)
