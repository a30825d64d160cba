"""Runs one projection as a consumer group with exactly-once effect on its database.

Per poll: the batch's projection rows, its processed event ids (`source`+`id`) and the group's next offsets
commit in ONE transaction. On assignment the consumer seeks to the positions stored in that database (never
Kafka's committed offsets). Position updates are fenced (`UPDATE ... WHERE next_offset = <what we read>`), so
a member that lost its partitions in a rebalance cannot apply a batch twice. Poison events (undecodable bytes,
an unknown type, a handler that raises) are published to the dead-letter topic and their position moves on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter

from sqlalchemy import Connection, Engine, bindparam, insert, select, update
from sqlalchemy.exc import IntegrityError, InterfaceError, OperationalError

from events.bus import Bus, Consumer, Record, TopicPartition
from events.catalog import CATALOG, UnknownEventType
from events.projections.deadletter import dead_letter_event
from events.projections.projection import Projection, ProjectionTx, bulk_insert
from events.projections.tracking import ConsumerPosition, ProcessedEvent, processed_ids
from events.topics import DEADLETTER
from rounds.gcpause import gc_paused

log = logging.getLogger(__name__)
POSITIONS = ConsumerPosition.__table__
PROCESSED = ProcessedEvent.__table__
_PARTITION = attrgetter("topic", "partition")
_OFFSET = attrgetter("offset")
# Built once: constructing a Core statement per batch and partition cost more than executing it.
_MOVE_POSITION = (
    update(POSITIONS)
    .where(
        POSITIONS.c.group_id == bindparam("b_group"),
        POSITIONS.c.topic == bindparam("b_topic"),
        POSITIONS.c.partition == bindparam("b_partition"),
        POSITIONS.c.next_offset == bindparam("b_previous"),
    )
    .values(next_offset=bindparam("b_next"))
)
INFRASTRUCTURE_ERRORS = (OperationalError, InterfaceError)  # the database is down: retry, don't dead-letter


def known_event_type(event_type: str) -> bool:
    try:
        CATALOG.spec(event_type)
    except UnknownEventType:
        return False
    return True


@dataclass
class RunStats:
    applied: int = 0
    duplicates: int = 0
    skipped: int = 0
    dead_lettered: int = 0
    batches: int = 0

    def add(self, other: RunStats) -> None:
        for name in ("applied", "duplicates", "skipped", "dead_lettered", "batches"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


class _ProjectionFailed(Exception):
    def __init__(self, error: BaseException) -> None:
        super().__init__(repr(error))
        self.error = f"{type(error).__name__}: {error}"


class _Fenced(Exception):
    """Another member moved our position: drop this batch and re-seek to the database's positions."""


class ProjectionRunner:
    def __init__(
        self,
        bus: Bus,
        engine: Engine,
        projection: Projection,
        *,
        group_id: str | None = None,
        key: str | None = None,
        batch_size: int = 500,
        poll_timeout_s: float = 0.5,
        publish_dead_letters: bool = True,
        deadletter_topic: str = DEADLETTER,
        known_type: Callable[[str], bool] = known_event_type,
    ) -> None:
        self.bus, self.engine, self.projection = bus, engine, projection
        suffix = f".{projection.suffix}" if projection.suffix else ""
        self.group_id = group_id or f"projection.{projection.name}{suffix}"
        self.key = key  # replay of one session: only records with this key have an effect
        self.batch_size, self.poll_timeout_s = batch_size, poll_timeout_s
        self.publish_dead_letters, self.known_type = publish_dead_letters, known_type
        self.deadletter_topic = deadletter_topic
        self.stats = RunStats()
        self._positions: dict[TopicPartition, int | None] = {}
        self._consumer: Consumer | None = None
        self._stop = threading.Event()
        self._lettered: set[tuple[str, int, int]] = set()  # dead letters published but not yet committed past
        self._known_types: set[str] = set()

    # -- lifecycle -----------------------------------------------------------------------------------------
    def open(self) -> ProjectionRunner:
        if self._consumer is None:
            self.projection.create_tables(self.engine)
            self._consumer = self.bus.consumer(
                self.group_id, list(self.projection.topics), from_beginning=True, on_assign=self._on_assign
            )
        return self

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def request_stop(self) -> None:
        """Graceful stop (signal handlers call this): the batch in progress is finished and committed."""
        self._stop.set()

    def __enter__(self) -> ProjectionRunner:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def consumer(self) -> Consumer:
        if self._consumer is None:
            raise RuntimeError("runner is not open")
        return self._consumer

    # -- positions -----------------------------------------------------------------------------------------
    def _load_positions(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        tps = list(tps)
        found: dict[TopicPartition, int | None] = dict.fromkeys(tps)
        if not tps:
            return found
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(POSITIONS.c.topic, POSITIONS.c.partition, POSITIONS.c.next_offset).where(
                    POSITIONS.c.group_id == self.group_id,
                    POSITIONS.c.topic.in_({tp.topic for tp in tps}),
                )
            )
            for topic, partition, offset in rows:
                tp = TopicPartition(topic, partition)
                if tp in found:
                    found[tp] = offset
        return found

    def _seek_stored(self, positions: dict[TopicPartition, int | None]) -> None:
        fresh = [tp for tp, offset in positions.items() if offset is None]
        for tp, offset in positions.items():
            if offset is not None:
                self.consumer.seek(tp, offset)
        if fresh:
            self.consumer.seek_to_beginning(fresh)

    def _on_assign(self, tps: set[TopicPartition]) -> None:
        positions = self._load_positions(tps)
        self._positions = positions
        self._seek_stored(positions)

    def positions(self) -> dict[TopicPartition, int | None]:
        return dict(self._positions)

    def _accept(self, records: Sequence[Record]) -> list[Record]:
        """Keep records at or after our stored position.

        A partition first seen here (no assignment callback) has its position loaded; if the consumer is not
        exactly there, seek and drop that partition's records from this batch."""
        resync: set[TopicPartition] = set()
        kept: list[Record] = []
        for (topic, partition), run in groupby(records, key=_PARTITION):  # poll returns runs per partition
            tp = TopicPartition(topic, partition)
            if tp in resync:
                continue
            run = list(run)
            if tp not in self._positions:
                stored = self._load_positions([tp])[tp]
                self._positions[tp] = stored
                if stored is not None and run[0].offset != stored:
                    self.consumer.seek(tp, stored)
                    resync.add(tp)
                    continue
            position = self._positions[tp]
            if position is None or min(map(_OFFSET, run)) >= position:
                kept.extend(run)
            else:
                kept.extend(record for record in run if record.offset >= position)
        return kept

    # -- applying a batch ----------------------------------------------------------------------------------
    def poll_once(self) -> RunStats:
        """Poll one batch and apply it; returns what happened to it.

        The cycle collector is paused (rounds/gcpause.py) from the moment records already fetched are read
        until the batch is applied and freed: re-enabled in between, its next pass walked the whole live
        batch (and every few batches the whole heap) — ~9 % of an end-to-end consumer's time (py-spy). Only
        a poll that has to wait for data waits with the collector on, so other threads keep theirs."""
        with gc_paused():
            records = self.consumer.poll(timeout_s=0, max_records=self.batch_size)
            if records:
                return self._apply_polled(records)
        records = self.consumer.poll(timeout_s=self.poll_timeout_s, max_records=self.batch_size)
        with gc_paused():
            return self._apply_polled(records)

    def _apply_polled(self, records: list[Record]) -> RunStats:
        """Apply a polled batch (the caller holds the collector paused) and free its records before the
        collector is back on."""
        stats = RunStats()
        accepted = self._accept(records)
        if accepted:
            try:
                self._apply(accepted, stats)
            except _Fenced:
                log.warning("group %s: position moved by another member; re-seeking", self.group_id)
                stats = RunStats()
                self._on_assign(self.consumer.assignment())
        accepted.clear()
        records.clear()
        self.stats.add(stats)
        return stats

    def _apply(self, records: list[Record], stats: RunStats) -> None:
        try:
            stats.add(self._commit(records))
        except _ProjectionFailed:
            # Find the poison: one event per transaction, so good events still apply exactly once.
            for record in records:
                try:
                    stats.add(self._commit([record]))
                except _ProjectionFailed as failed:
                    stats.add(self._commit([record], poison=failed.error))

    def _rejection(self, record: Record, poison: str | None) -> str | None:
        """Why `record` goes to the dead-letter topic, if it does (decided without the database)."""
        if self.key is not None and record.key != self.key:
            return None  # another session's record in a one-session replay: no effect at all
        if poison is not None:
            return poison
        event = record.event
        if event is None:
            return "undecodable record: not a valid CloudEvent"
        if event.type not in self._known_types:  # types only ever get registered: remember the known ones
            if not self.known_type(event.type):
                return f"unknown event type {event.type!r}"
            self._known_types.add(event.type)
        return None

    def _dead_letter(self, dead: list[tuple[Record, str]]) -> None:
        """Publish before the position moves, outside our transaction (the SQL log may share the database).

        A batch retried event by event does not publish its letters twice (`_lettered`); a crash before the
        commit does, under the same event id."""
        for record, reason in dead:
            coordinates = (record.topic, record.partition, record.offset)
            if coordinates in self._lettered:
                continue
            self._lettered.add(coordinates)
            log.warning("group %s dead-letters %s/%s@%s: %s", self.group_id, record.topic, record.partition,
                        record.offset, reason)
            if self.publish_dead_letters:
                letter = dead_letter_event(self.group_id, record, reason)
                self.bus.publish(self.deadletter_topic, letter, record.key or "-")

    def _commit(self, records: list[Record], poison: str | None = None) -> RunStats:
        stats = RunStats(batches=1)
        rejections = [self._rejection(record, poison) for record in records]
        if any(rejections):
            dead = [(record, reason) for record, reason in zip(records, rejections, strict=True) if reason]
            candidates = [r for r, reason in zip(records, rejections, strict=True) if not reason]
        else:
            dead, candidates = [], records
        self._dead_letter(dead)
        with self.engine.begin() as conn:
            seen = processed_ids(conn, self.group_id, {r.event.id for r in candidates})
            fresh: list[Record] = []
            key, types = self.key, self.projection.types
            for record in candidates:
                event = record.event
                pair = (event.source, event.id)
                if key is not None and record.key != key:
                    stats.skipped += 1
                elif pair in seen:
                    stats.duplicates += 1
                elif event.type not in types:
                    stats.skipped += 1
                else:
                    seen.add(pair)
                    fresh.append(record)
            self._run_projection(conn, fresh)
            if fresh:
                group = self.group_id
                bulk_insert(conn, PROCESSED, [(group, r.event.id, r.event.source) for r in fresh],
                            columns=("group_id", "event_id", "source"))
            advanced = self._advance(conn, records)
        self._positions.update(advanced)
        if self._lettered:
            self._lettered = {c for c in self._lettered
                              if c[2] >= (self._positions.get(TopicPartition(c[0], c[1])) or 0)}
        stats.applied, stats.dead_lettered = len(fresh), len(dead)
        return stats

    def _run_projection(self, conn: Connection, fresh: list[Record]) -> None:
        if not fresh:
            return
        tx = ProjectionTx(conn, self.projection.tables)
        try:
            self.projection.prepare(tx, fresh)
            for record in fresh:
                self.projection.handle(tx, record)
            self.projection.finish(tx)
            tx.flush()
        except INFRASTRUCTURE_ERRORS:
            raise
        except Exception as exc:  # the projection rejected an event: find it and dead-letter it
            raise _ProjectionFailed(exc) from exc

    def _advance(self, conn: Connection, records: Sequence[Record]) -> dict[TopicPartition, int]:
        """Store next offsets, fenced on the value we last read or wrote."""
        advanced: dict[TopicPartition, int] = {}
        for (topic, partition), run in groupby(records, key=_PARTITION):
            tp = TopicPartition(topic, partition)
            advanced[tp] = max(advanced.get(tp, 0), max(map(_OFFSET, run)) + 1)
        for tp, next_offset in advanced.items():
            key = {"group_id": self.group_id, "topic": tp.topic, "partition": tp.partition}
            previous = self._positions.get(tp)
            if previous is None:
                try:
                    with conn.begin_nested():
                        conn.execute(insert(POSITIONS).values(**key, next_offset=next_offset))
                except IntegrityError as exc:
                    raise _Fenced() from exc
                continue
            result = conn.execute(_MOVE_POSITION, {"b_group": self.group_id, "b_topic": tp.topic,
                                                   "b_partition": tp.partition, "b_previous": previous,
                                                   "b_next": next_offset})
            if result.rowcount != 1:
                raise _Fenced()
        return advanced

    # -- loops ---------------------------------------------------------------------------------------------
    def end_targets(self) -> dict[TopicPartition, int]:
        """End offsets now of every partition of the projection's topics (not only this member's)."""
        tps = [tp for topic in self.projection.topics for tp in self.bus.partitions(topic)]
        return self.consumer.end_offsets(tps)

    def caught_up(self, targets: dict[TopicPartition, int]) -> bool:
        """Whether the group's stored positions (any member's) reached `targets`."""
        stored = self._load_positions(targets)
        return all((stored[tp] or 0) >= end for tp, end in targets.items())

    def run(
        self,
        *,
        until_caught_up: bool = False,
        idle_exit_s: float | None = None,
        timeout_s: float | None = None,
        stall_s: float = 30.0,
    ) -> RunStats:
        """Poll until stopped; `until_caught_up` stops once the end offsets seen at start are applied.

        Watchdog: a member that gets no data for `stall_s` while the group is behind its targets rejoins the
        group (a fresh consumer), so a lost assignment or a stuck fetch cannot stall a replay forever."""
        self.open()
        started = last_data = time.monotonic()
        targets = self.end_targets() if until_caught_up else None
        while not self._stop.is_set():
            if targets is not None and self.caught_up(targets):
                break
            batch = self.poll_once()
            now = time.monotonic()
            if batch.batches:
                last_data = now
            elif targets is not None and now - last_data >= stall_s:
                # No partitions, or partitions that deliver nothing (seen with kafka-python right after a
                # broker restart): either way the group is behind and this member is stuck.
                log.warning("group %s: no data for %.0fs while behind; rejoining", self.group_id, stall_s)
                self.close()
                self.open()
                last_data = now
            if idle_exit_s is not None and now - last_data >= idle_exit_s:
                break
            if timeout_s is not None and now - started >= timeout_s:
                raise TimeoutError(f"group {self.group_id} did not finish within {timeout_s}s: {self.stats}, "
                                   f"assignment {sorted(self.consumer.assignment(), key=str)}, "
                                   f"positions {self._positions}")
        return self.stats
