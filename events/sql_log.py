"""SqlLog: the embedded bus, a partitioned append-only log in the application database (SQLite/PostgreSQL).

Guarantees, the same as KafkaBus:
- offsets are dense per partition: an append increments the partition's counter row (a row lock on PostgreSQL,
  the database write lock on SQLite) and inserts the records in the same transaction, so concurrent producers
  commit in offset order and a reader never sees a gap;
- `publish` returns after the commit (durable); one key always maps to one partition (Kafka's murmur2);
- consumer groups split partitions among live members (events/sql_consumer.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from sqlalchemy import Engine, bindparam, func, select, update
from sqlalchemy.engine import Connection

from events.bus import AssignCallback, Published, TopicPartition, TopicSpec, UnknownTopic
from events.catalog import CATALOG, Catalog
from events.codec import CheckedPublisher, Row
from events.sql_consumer import SqlConsumer
from events.sql_models import LogPartition, LogRecord
from events.sql_ops import bulk_insert, now_ms, upsert
from events.topics import partition_for

# Built once: a statement constructed per publish cost more Python than its execution (cache key, clauses),
# and the FHIR API publishes one small batch per recorded exchange.
_CLAIM_OFFSETS = (
    update(LogPartition)
    .where(LogPartition.topic == bindparam("b_topic"), LogPartition.partition == bindparam("b_partition"))
    .values(next_offset=LogPartition.next_offset + bindparam("b_count"))
    .returning(LogPartition.next_offset)
)
LOG_RECORDS = LogRecord.__table__
_RECORD_COLUMNS = ("topic", "partition", "offset", "key", "event_id", "event_source", "payload",
                   "timestamp_ms")


class SqlLog(CheckedPublisher):
    """The embedded `Bus` (events/bus.py) on the tables of events/sql_models.py (revision 0003_event_log)."""

    def __init__(
        self,
        engine: Engine,
        *,
        catalog: Catalog = CATALOG,
        session_timeout_s: float = 10.0,
        rebalance_interval_s: float = 0.5,
        poll_interval_s: float = 0.05,
    ) -> None:
        self.engine = engine  # the process's, made by its composition root: the log does not dispose of it
        self.catalog = catalog
        self.session_timeout_s = session_timeout_s
        self.rebalance_interval_s = rebalance_interval_s
        self.poll_interval_s = poll_interval_s
        self._partition_counts: dict[str, int] = {}

    # -- topics --------------------------------------------------------------------------------------------
    def ensure_topics(self, topics: Sequence[TopicSpec]) -> None:
        """Create missing topics (idempotent; an existing topic keeps its partitions)."""
        with self.engine.begin() as conn:
            for spec in topics:
                if spec.partitions < 1:
                    raise ValueError(f"topic {spec.name}: partitions must be >= 1")
                if self._count(conn, spec.name):
                    continue
                for p in range(spec.partitions):
                    upsert(
                        conn,
                        LogPartition,
                        {"topic": spec.name, "partition": p, "next_offset": 0},
                        ["topic", "partition"],
                    )

    def _count(self, conn: Connection, topic: str) -> int:
        return (
            conn.scalar(select(func.count()).select_from(LogPartition).where(LogPartition.topic == topic))
            or 0
        )

    def _partition_count(self, topic: str) -> int:
        if topic not in self._partition_counts:
            with self.engine.connect() as conn:
                count = self._count(conn, topic)
            if not count:
                raise UnknownTopic(
                    f"topic {topic!r} does not exist (create it with ensure_topics / rounds events topics)"
                )
            self._partition_counts[topic] = count
        return self._partition_counts[topic]

    # -- producing -----------------------------------------------------------------------------------------
    def _append(self, topic: str, rows: list[Row]) -> list[Published]:
        """Allocate offsets and insert the rows in one transaction (durable when it returns)."""
        count = self._partition_count(topic)  # read outside the write transaction (SQLite lock upgrade)
        by_partition: dict[int, list[int]] = defaultdict(list)
        for i, (key, _, _) in enumerate(rows):
            by_partition[partition_for(key.decode(), count)].append(i)
        published: list[Published | None] = [None] * len(rows)
        now = now_ms()
        with self.engine.begin() as conn:
            for partition in sorted(by_partition):  # fixed lock order: no deadlock between producers
                indexes = by_partition[partition]
                end = conn.execute(
                    _CLAIM_OFFSETS, {"b_topic": topic, "b_partition": partition, "b_count": len(indexes)}
                ).scalar_one()
                values = []
                for offset, i in enumerate(indexes, start=end - len(indexes)):
                    key, raw, event = rows[i]
                    values.append((topic, partition, offset, key.decode(), event.id if event else None,
                                   event.source if event else None, raw, now))
                    published[i] = Published(topic, partition, offset)
                # through the driver, the bytes as they are (SQLAlchemy's per-row parameter processing cost
                # as much as the insert)
                bulk_insert(conn, LOG_RECORDS, values, columns=_RECORD_COLUMNS)
        return published  # type: ignore[return-value]

    # -- consuming -----------------------------------------------------------------------------------------
    def consumer(
        self,
        group_id: str,
        topics: Sequence[str],
        *,
        from_beginning: bool = True,
        on_assign: AssignCallback | None = None,
    ) -> SqlConsumer:
        if not group_id:
            raise ValueError("group_id is required (use reader() for a group-less consumer)")
        return SqlConsumer(self, group_id, list(topics), from_beginning=from_beginning, on_assign=on_assign)

    def reader(self, topics: Sequence[str]) -> SqlConsumer:
        return SqlConsumer(self, None, list(topics), from_beginning=True, on_assign=None)

    def end_offsets(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(LogPartition.topic, LogPartition.partition, LogPartition.next_offset).where(
                    LogPartition.topic.in_({tp.topic for tp in tps})
                )
            ).all()
        ends = {TopicPartition(t, p): n for t, p, n in rows}
        missing = [tp for tp in tps if tp not in ends]
        if missing:
            raise UnknownTopic(f"unknown partitions {missing}")
        return {tp: ends[tp] for tp in tps}

    def close(self) -> None:
        """Nothing of its own to release: the engine belongs to whoever made it."""
