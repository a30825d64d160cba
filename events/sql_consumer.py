"""SqlConsumer: a consumer group member (or a group-less reader) on the embedded SQL log.

A group splits partitions among live members: members heartbeat in `event_log_member`, the desired assignment
is round-robin over the sorted live members, and a partition is read only by the member holding its
`event_log_claim` row (primary key: at most one owner). A member first releases what it no longer wants, the
new owner claims it on its next rebalance, so two members never read one partition at once. A member whose
heartbeat is older than the session timeout (e.g. a killed process) is evicted and its partitions are claimed.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Protocol

import orjson
from sqlalchemy import delete, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from events.bus import AssignCallback, Record, TopicPartition
from events.catalog import Catalog
from events.codec import to_record
from events.sql_models import GroupMember, GroupOffset, LogRecord, PartitionClaim
from events.sql_ops import now_ms, retryable, upsert


class LogTables(Protocol):
    """What a consumer needs of its log (SqlLog): the database, the catalog, timings, partition metadata.
    A protocol rather than SqlLog itself: SqlLog creates consumers (sql_log.py imports this module)."""

    engine: Engine
    catalog: Catalog
    session_timeout_s: float
    rebalance_interval_s: float
    poll_interval_s: float

    def partitions(self, topic: str) -> list[TopicPartition]: ...

    def end_offsets(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]: ...


class SqlConsumer:
    """A member of a consumer group on the SQL log (or a group-less reader when group_id is None)."""

    def __init__(
        self,
        log: LogTables,
        group_id: str | None,
        topics: list[str],
        *,
        from_beginning: bool,
        on_assign: AssignCallback | None,
    ) -> None:
        self.log, self.group_id, self.topics = log, group_id, topics
        self.member_id = uuid.uuid4().hex
        self.from_beginning, self.on_assign = from_beginning, on_assign
        self._all = [tp for topic in topics for tp in log.partitions(topic)]  # raises UnknownTopic
        self._assigned: set[TopicPartition] = set()
        self._positions: dict[TopicPartition, int] = {}
        self._next_rebalance = 0.0
        self._rotation = 0
        self._closed = False
        if group_id is None:
            self._set_assignment(set(self._all))

    # -- group membership ----------------------------------------------------------------------------------
    def _rebalance(self) -> None:
        if self.group_id is None or time.monotonic() < self._next_rebalance:
            return
        self._next_rebalance = time.monotonic() + self.log.rebalance_interval_s
        now = now_ms()
        group = self.group_id
        for attempt in range(5):
            try:
                with self.log.engine.begin() as conn:
                    owned = self._claim(conn, group, now)
                break
            except DBAPIError as exc:  # deadlock / serialization failure / SQLite busy: retry the heartbeat
                if attempt == 4 or not retryable(exc):
                    raise
                time.sleep(0.05 * (attempt + 1))
        assignment = {TopicPartition(t, p) for t, p in owned}
        if assignment != self._assigned:
            self._set_assignment(assignment)

    def _claim(self, conn: Connection, group: str, now: int) -> list[tuple[str, int]]:
        """Heartbeat, evict dead members, release unwanted partitions, claim free wanted ones; return ours."""
        upsert(
            conn,
            GroupMember,
            {
                "group_id": group,
                "member_id": self.member_id,
                "topics": orjson.dumps(self.topics).decode(),
                "heartbeat_ms": now,
            },
            ["group_id", "member_id"],
            ["topics", "heartbeat_ms"],
        )
        expired = now - int(self.log.session_timeout_s * 1000)
        conn.execute(
            delete(GroupMember).where(GroupMember.group_id == group, GroupMember.heartbeat_ms < expired)
        )
        live = conn.execute(
            select(GroupMember.member_id, GroupMember.topics)
            .where(GroupMember.group_id == group)
            .order_by(GroupMember.member_id)
        ).all()
        live_ids = [m for m, _ in live]
        conn.execute(
            delete(PartitionClaim).where(
                PartitionClaim.group_id == group, PartitionClaim.member_id.not_in(live_ids)
            )
        )
        desired = self._desired([(m, set(orjson.loads(t))) for m, t in live])
        mine = conn.execute(
            select(PartitionClaim.topic, PartitionClaim.partition).where(
                PartitionClaim.group_id == group, PartitionClaim.member_id == self.member_id
            )
        ).all()
        for topic, partition in mine:
            if TopicPartition(topic, partition) not in desired:
                conn.execute(
                    delete(PartitionClaim).where(
                        PartitionClaim.group_id == group,
                        PartitionClaim.topic == topic,
                        PartitionClaim.partition == partition,
                        PartitionClaim.member_id == self.member_id,
                    )
                )
        for tp in sorted(desired, key=lambda t: (t.topic, t.partition)):
            upsert(
                conn,
                PartitionClaim,
                {
                    "group_id": group,
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "member_id": self.member_id,
                },
                ["group_id", "topic", "partition"],
            )
        owned = conn.execute(
            select(PartitionClaim.topic, PartitionClaim.partition).where(
                PartitionClaim.group_id == group, PartitionClaim.member_id == self.member_id
            )
        ).all()
        return owned

    def _desired(self, live: list[tuple[str, set[str]]]) -> set[TopicPartition]:
        """Round-robin of each topic's partitions over the sorted live members subscribed to it."""
        desired = set()
        for tp in self._all:
            members = [m for m, topics in live if tp.topic in topics]
            if members and members[tp.partition % len(members)] == self.member_id:
                desired.add(tp)
        return desired

    def _set_assignment(self, assignment: set[TopicPartition]) -> None:
        added = assignment - self._assigned
        self._positions = {tp: pos for tp, pos in self._positions.items() if tp in assignment}
        ends = self.log.end_offsets(sorted(added, key=lambda t: (t.topic, t.partition))) if added else {}
        for tp in added:
            committed = self.committed(tp) if self.group_id is not None else None
            if committed is not None:
                self._positions[tp] = committed
            else:
                self._positions[tp] = 0 if self.from_beginning else ends[tp]
        self._assigned = assignment
        if self.on_assign is not None:
            self.on_assign(set(assignment))

    # -- Consumer protocol ---------------------------------------------------------------------------------
    def poll(self, timeout_s: float = 1.0, max_records: int = 500) -> list[Record]:
        deadline = time.monotonic() + timeout_s
        while True:
            self._rebalance()
            records = self._fetch(max_records)
            remaining = deadline - time.monotonic()
            if records or remaining <= 0:
                return records
            time.sleep(min(self.log.poll_interval_s, remaining))

    def _fetch(self, max_records: int) -> list[Record]:
        tps = sorted(self._assigned, key=lambda t: (t.topic, t.partition))
        if not tps:
            return []
        self._rotation = (self._rotation + 1) % len(tps)
        tps = tps[self._rotation :] + tps[: self._rotation]  # fairness between partitions
        out: list[Record] = []
        with self.log.engine.connect() as conn:
            for tp in tps:
                if len(out) >= max_records:
                    break
                rows = conn.execute(
                    select(LogRecord.offset, LogRecord.key, LogRecord.payload, LogRecord.timestamp_ms)
                    .where(
                        LogRecord.topic == tp.topic,
                        LogRecord.partition == tp.partition,
                        LogRecord.offset >= self._positions[tp],
                    )
                    .order_by(LogRecord.offset)
                    .limit(max_records - len(out))
                ).all()
                for offset, key, payload, ts in rows:
                    out.append(to_record(tp.topic, tp.partition, offset, key, payload, ts, self.log.catalog))
                if rows:
                    self._positions[tp] = rows[-1][0] + 1
        return out

    def assignment(self) -> set[TopicPartition]:
        self._rebalance()
        return set(self._assigned)

    def position(self, tp: TopicPartition) -> int:
        self._require_assigned(tp)
        return self._positions[tp]

    def _require_assigned(self, tp: TopicPartition) -> None:
        if tp not in self._assigned:
            raise ValueError(
                f"{tp} is not assigned to this consumer (assignment: {sorted(self._assigned, key=str)})"
            )

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._require_assigned(tp)
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        self._positions[tp] = offset

    def seek_to_beginning(self, tps: Sequence[TopicPartition] | None = None) -> None:
        for tp in self._assigned if tps is None else tps:
            self.seek(tp, 0)

    def commit(self, offsets: dict[TopicPartition, int]) -> None:
        if self.group_id is None:
            raise RuntimeError("a group-less reader cannot commit offsets")
        with self.log.engine.begin() as conn:
            for tp, offset in sorted(offsets.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
                upsert(
                    conn,
                    GroupOffset,
                    {
                        "group_id": self.group_id,
                        "topic": tp.topic,
                        "partition": tp.partition,
                        "offset": offset,
                    },
                    ["group_id", "topic", "partition"],
                    ["offset"],
                )

    def committed(self, tp: TopicPartition) -> int | None:
        if self.group_id is None:
            return None
        with self.log.engine.connect() as conn:
            return conn.scalar(
                select(GroupOffset.offset).where(
                    GroupOffset.group_id == self.group_id,
                    GroupOffset.topic == tp.topic,
                    GroupOffset.partition == tp.partition,
                )
            )

    def end_offsets(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        return self.log.end_offsets(tps)

    def close(self) -> None:
        """Leave the group at once (its partitions are free for the other members' next rebalance)."""
        if self._closed:
            return
        self._closed = True
        if self.group_id is not None:
            with self.log.engine.begin() as conn:
                conn.execute(
                    delete(PartitionClaim).where(
                        PartitionClaim.group_id == self.group_id, PartitionClaim.member_id == self.member_id
                    )
                )
                conn.execute(
                    delete(GroupMember).where(
                        GroupMember.group_id == self.group_id, GroupMember.member_id == self.member_id
                    )
                )
        self._assigned = set()
