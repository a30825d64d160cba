"""Runs one projection as a consumer group with exactly-once effect on its database.

Per poll: the batch's projection rows, its processed event ids (`source`+`id`) and the group's next offsets
commit in ONE transaction. On assignment the consumer seeks to the positions stored in that database (never
Kafka's committed offsets). Position updates are fenced (`UPDATE ... WHERE next_offset = <what we read>`), so
a member that lost its partitions in a rebalance cannot apply a batch twice. Poison events (undecodable bytes,
an unknown type, a handler that raises) are published to the dead-letter topic and their position moves on;
a handler that raises `RetryLater` (retry.py) has its batch rolled back and polled again after a backoff.
Events a handler emits (`tx.emit`) are outbox rows of the batch's transaction, relayed after the commit.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import InterfaceError, OperationalError

from events.bus import Bus, Consumer, Record, TopicPartition
from events.envelope import CloudEvent
from events.projections.deadletter import DeadLetters, known_event_type
from events.projections.projection import Projection, ProjectionTx, bulk_insert
from events.projections.retry import Backoff, RetryLater
from events.projections.tracking import (
    Fenced,
    ProcessedEvent,
    advance_positions,
    load_positions,
    processed_ids,
)
from events.relay import Relay
from events.topics import DEADLETTER
from foundation.gcpause import gc_paused

log = logging.getLogger(__name__)
PROCESSED = ProcessedEvent.__table__
_PARTITION = attrgetter("topic", "partition")
_OFFSET = attrgetter("offset")
INFRASTRUCTURE_ERRORS = (OperationalError, InterfaceError)  # the database is down: retry, don't dead-letter


@dataclass
class RunStats:
    applied: int = 0
    duplicates: int = 0
    skipped: int = 0
    dead_lettered: int = 0
    batches: int = 0
    retries: int = 0  # batches rolled back by RetryLater, to be polled again
    emitted: int = 0  # events committed to the outbox by handlers

    def add(self, other: RunStats) -> None:
        for name in ("applied", "duplicates", "skipped", "dead_lettered", "batches", "retries", "emitted"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


class _ProjectionFailed(Exception):
    def __init__(self, error: BaseException) -> None:
        super().__init__(repr(error))
        self.error = f"{type(error).__name__}: {error}"


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
        backoff: Backoff | None = None,
        emit: bool = True,
        relay_emitted: bool = True,
        relay_rows: int = 1,
        after_commit: Callable[[RunStats], None] | None = None,
        make_tables: bool = True,
    ) -> None:
        """`emit=False` drops what handlers emit (replays). `relay_emitted`: publish it after the commits,
        once `relay_rows` rows are pending (1: after each; more: fewer, larger appends to the log, for a
        batch job), and at start what a previous run committed but never relayed (else a separate
        `rounds events relay` does). `after_commit`: a test hook run after each commit, before the relay
        (fault tests kill the process there). `make_tables=False`: a member joining a group whose tables the
        process that started the group made (they must exist when it opens)."""
        self.bus, self.engine, self.projection = bus, engine, projection
        suffix = f".{projection.suffix}" if projection.suffix else ""
        self.group_id = group_id or f"projection.{projection.name}{suffix}"
        self.key = key  # replay of one session: only records with this key have an effect
        self.batch_size, self.poll_timeout_s = batch_size, poll_timeout_s
        self.dead_letters = DeadLetters(bus, self.group_id, deadletter_topic, publish=publish_dead_letters,
                                        known_type=known_type)
        self.stats = RunStats()
        self._positions: dict[TopicPartition, int | None] = {}
        self._consumer: Consumer | None = None
        self._stop = threading.Event()
        self.backoff = backoff or Backoff()
        self._retry_in: float | None = None  # seconds to wait before polling again (RetryLater)
        self.emit = emit
        self.relay = Relay(engine, bus) if relay_emitted and emit else None  # publishes what handlers emit
        self._relay_due = self.relay is not None  # at start: what a killed run committed and never relayed
        self._relay_start, self._relay_all = True, False  # all pending at first; all: others' may be pending
        self.after_commit, self.relay_rows = after_commit, relay_rows
        self.make_tables = make_tables

    # -- lifecycle -----------------------------------------------------------------------------------------
    def open(self) -> ProjectionRunner:
        if self._consumer is None:
            if self.make_tables:
                self.projection.create_tables(self.engine)
            self._consumer = self.bus.consumer(
                self.group_id, list(self.projection.topics), from_beginning=True, on_assign=self._on_assign
            )
        return self

    def close(self) -> None:
        self.relay_emitted(everything=True)
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
    def _seek_stored(self, positions: dict[TopicPartition, int | None]) -> None:
        fresh = [tp for tp, offset in positions.items() if offset is None]
        for tp, offset in positions.items():
            if offset is not None:
                self.consumer.seek(tp, offset)
        if fresh:
            self.consumer.seek_to_beginning(fresh)

    def _on_assign(self, tps: set[TopicPartition]) -> None:
        positions = load_positions(self.engine, self.group_id, tps)
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
                stored = load_positions(self.engine, self.group_id, [tp])[tp]
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
        """Poll one batch and apply it; returns what happened to it. The cycle collector is paused
        (foundation/gcpause.py) while the relay publishes and from the moment records already fetched are read
        until the batch is applied and freed: re-enabled in between, its next pass walked the whole live
        batch (and every few batches the whole heap) — ~9 % of an end-to-end consumer's time (py-spy). Only
        a poll that has to wait for data waits with the collector on, so other threads keep theirs."""
        with gc_paused():
            self.relay_emitted()
        self._wait_to_retry()
        with gc_paused():
            records = self.consumer.poll(timeout_s=0, max_records=self.batch_size)
            if records:
                return self._apply_polled(records)
        self.relay_emitted(everything=True)  # idle: what other members left pending too (one that died)
        records = self.consumer.poll(timeout_s=self.poll_timeout_s, max_records=self.batch_size)
        with gc_paused():
            return self._apply_polled(records)

    def relay_emitted(self, *, everything: bool = False) -> None:
        """Publish what committed batches emitted (outbox rows; on failure they stay pending for later):
        between batches only this runner's own rows (from its events, never parsing another member's); at
        its first relay and with `everything` (idle, at the end, at close), all pending (a dead member's)."""
        if self.relay is None or not (self._relay_due or (everything and self._relay_all)):
            return
        mine = not (everything or self._relay_start)
        if mine and self.relay.expected() < self.relay_rows:
            return  # fewer of this runner's own rows pending than it relays at once
        try:
            self.relay.drain(mine=mine)
            self._relay_due = self._relay_start = False
            self._relay_all = mine
        except Exception:  # noqa: BLE001 - the rows stay in the outbox: relayed on a later batch
            log.exception("group %s: relaying emitted events failed; will retry", self.group_id)

    def _wait_to_retry(self) -> None:
        """Wait out a RetryLater's backoff before polling the same events again (a stop request ends it)."""
        if self._retry_in is not None:
            self._stop.wait(self._retry_in)
            self._retry_in = None

    def _apply_polled(self, records: list[Record]) -> RunStats:
        """Apply a polled batch (the caller holds the collector paused) and free its records before the
        collector is back on."""
        stats = RunStats()
        accepted = self._accept(records)
        if accepted:
            try:
                self._apply(accepted, stats)
            except Fenced:
                log.warning("group %s: position moved by another member; re-seeking", self.group_id)
                stats = RunStats()
                self._on_assign(self.consumer.assignment())
            except RetryLater as retry:
                self._retry_in = self.backoff.delay(retry.delay_s)
                stats.retries += 1
                log.info("group %s: retrying from the stored positions in %.1fs: %s", self.group_id,
                         self._retry_in, retry)
                tps = {TopicPartition(r.topic, r.partition) for r in accepted}
                self._seek_stored({tp: self._positions.get(tp) for tp in tps})
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

    def _commit(self, records: list[Record], poison: str | None = None) -> RunStats:
        stats = RunStats(batches=1)
        key, letters = self.key, self.dead_letters  # one-session replay: others have no effect
        rejections = [None if key is not None and record.key != key else letters.reason(record, poison)
                      for record in records]
        if any(rejections):
            dead = [(record, reason) for record, reason in zip(records, rejections, strict=True) if reason]
            candidates = [r for r, reason in zip(records, rejections, strict=True) if not reason]
        else:
            dead, candidates = [], records
        self.dead_letters.publish(dead)
        prefetched = self._prefetch(candidates)
        with self.engine.begin() as conn:
            fresh = self._fresh(conn, candidates, stats)
            emitted = self._run_projection(conn, fresh, prefetched)
            stats.emitted = len(emitted)
            if fresh:
                group = self.group_id
                bulk_insert(conn, PROCESSED, [(group, r.event.id, r.event.source) for r in fresh],
                            columns=("group_id", "event_id", "source"))
            advanced = advance_positions(conn, self.group_id, self._positions, records)
        self._positions.update(advanced)
        self.backoff.reset()
        if emitted and self.relay is not None:
            self.relay.expect(emitted)  # committed: relayed from these objects, not re-parsed from the rows
            self._relay_due = True
        if self.after_commit is not None:
            self.after_commit(stats)
        self.dead_letters.forget_committed(self._positions)
        stats.applied, stats.dead_lettered = len(fresh), len(dead)
        return stats

    def _fresh(self, conn: Connection, candidates: list[Record], stats: RunStats | None = None,
               ) -> list[Record]:
        """The candidates this projection has to apply: its key and types, not processed before."""
        seen = processed_ids(conn, self.group_id, {r.event.id for r in candidates})
        fresh: list[Record] = []
        key, types = self.key, self.projection.types
        counts = stats or RunStats()
        for record in candidates:
            event = record.event
            pair = (event.source, event.id)
            if key is not None and record.key != key:
                counts.skipped += 1
            elif pair in seen:
                counts.duplicates += 1
            elif event.type not in types:
                counts.skipped += 1
            else:
                seen.add(pair)
                fresh.append(record)
        return fresh

    def _prefetch(self, candidates: list[Record]) -> object:
        """The projection's slow I/O for the events it will apply, with no transaction open (a short read of
        the processed ids first, so a replayed duplicate never calls out)."""
        if type(self.projection).prefetch is Projection.prefetch or not candidates:
            return None
        with self.engine.connect() as conn:
            fresh = self._fresh(conn, candidates)
        if not fresh:
            return None
        return self._guarded(lambda: self.projection.prefetch(fresh))

    def _run_projection(self, conn: Connection, fresh: list[Record], prefetched: object) -> list[CloudEvent]:
        """Apply `fresh` in the batch's transaction; returns the events the handlers emitted (outbox rows)."""
        if not fresh:
            return []
        tx = ProjectionTx(conn, self.projection.tables, prefetched=prefetched, emitting=self.emit)

        def apply() -> None:
            self.projection.prepare(tx, fresh)
            for record in fresh:
                self.projection.handle(tx, record)
            self.projection.finish(tx)
            tx.flush()

        self._guarded(apply)
        return tx.emitted_events()

    @staticmethod
    def _guarded(step: Callable[[], object]) -> object:
        """Run projection code: RetryLater and infrastructure errors pass through, anything else is poison."""
        try:
            return step()
        except (RetryLater, *INFRASTRUCTURE_ERRORS):
            raise
        except Exception as exc:  # the projection rejected an event: find it and dead-letter it
            raise _ProjectionFailed(exc) from exc

    # -- loops ---------------------------------------------------------------------------------------------
    def end_targets(self) -> dict[TopicPartition, int]:
        """End offsets now of every partition of the projection's topics (not only this member's)."""
        tps = [tp for topic in self.projection.topics for tp in self.bus.partitions(topic)]
        return self.consumer.end_offsets(tps)

    def caught_up(self, targets: dict[TopicPartition, int]) -> bool:
        """Whether the group's stored positions (any member's) reached `targets`."""
        stored = load_positions(self.engine, self.group_id, targets)
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
        self.relay_emitted(everything=True)
        return self.stats
