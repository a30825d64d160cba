"""KafkaBus: the `Bus` (events/bus.py) on Apache Kafka with kafka-python.

- one idempotent producer (acks=all): `publish` waits for the broker's ack, `publish_many` sends a batch then
  flushes once; the partition is computed by `events.topics.partition_for` (murmur2, Kafka's default), so both
  backends place a key on the same partition number;
- consumers join groups with manual offsets (enable_auto_commit=False) and get an `on_assign` callback from a
  ConsumerRebalanceListener, where a projection seeks to positions stored in its own database;
- topics are created by the admin client (`ensure_topics`) and never auto-created.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Sequence

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTP
from kafka.admin import NewTopic
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.errors import KafkaError, TopicAlreadyExistsError
from kafka.structs import OffsetAndMetadata

from events.bus import AssignCallback, Published, Record, TopicPartition, TopicSpec, UnknownTopic
from events.catalog import CATALOG, Catalog
from events.codec import CheckedPublisher, Row, to_record
from events.envelope import MAX_EVENT_BYTES
from events.topics import partition_for

log = logging.getLogger(__name__)

PRODUCER_CONFIG = {
    "acks": "all",
    "enable_idempotence": True,
    # Every synchronous publish flushes (no wait); a streamed publish (publish_chunks) fills larger batches:
    # fewer produce requests and futures batches (benchmarks/README.md has the measurement).
    "linger_ms": 20,
    "batch_size": 512 * 1024,
    "max_request_size": 4 * MAX_EVENT_BYTES,
    "max_in_flight_requests_per_connection": 5,
    "retries": 2**31 - 1,
    "delivery_timeout_ms": 120_000,
}
SEND_TIMEOUT_S = 120
ADMIN_ATTEMPTS = 5  # an admin request and its retries after retriable errors

CONSUMER_CONFIG = {
    "enable_auto_commit": False,
    "max_partition_fetch_bytes": 4 * MAX_EVENT_BYTES,
    "metadata_max_age_ms": 30_000,
    # A crashed member's partitions move on after 10 s, not kafka-python's default 45 s.
    "session_timeout_ms": 10_000,
    "heartbeat_interval_ms": 3_000,
}


def _ktp(tp: TopicPartition) -> KafkaTP:
    return KafkaTP(tp.topic, tp.partition)


def _tp(ktp: KafkaTP) -> TopicPartition:
    return TopicPartition(ktp.topic, ktp.partition)


class KafkaBus(CheckedPublisher):
    """The Kafka backend. `bootstrap` is ROUNDS_KAFKA_BOOTSTRAP ("host:port[,host:port]")."""

    def __init__(self, bootstrap: str, *, catalog: Catalog = CATALOG, client_id: str = "rounds") -> None:
        if not bootstrap:
            raise ValueError("KafkaBus needs bootstrap servers (ROUNDS_KAFKA_BOOTSTRAP)")
        self.bootstrap, self.catalog, self.client_id = bootstrap, catalog, client_id
        self._producer: KafkaProducer | None = None
        self._admin: KafkaAdminClient | None = None
        self._partition_counts: dict[str, int] = {}
        # The simulator publishes from worker threads: the clients are made once, and the admin client (not
        # thread-safe) is used by one thread at a time -- concurrent first lookups of a topic failed with
        # NodeNotReadyError('No node_id provided') about once in 300 sessions.
        self._setup = threading.RLock()

    @property
    def admin(self) -> KafkaAdminClient:
        with self._setup:
            if self._admin is None:
                self._admin = KafkaAdminClient(
                    bootstrap_servers=self.bootstrap, client_id=f"{self.client_id}-admin"
                )
            return self._admin

    @property
    def producer(self) -> KafkaProducer:
        if self._producer is None:
            with self._setup:
                if self._producer is None:
                    self._producer = KafkaProducer(
                        bootstrap_servers=self.bootstrap, client_id=self.client_id, **PRODUCER_CONFIG
                    )
        return self._producer

    def _ask_admin(self, call, attempts: int = ADMIN_ATTEMPTS):
        """An admin request, one thread at a time, sent again after a retriable error (a broker connection
        not ready yet), with a growing pause; the last error is raised."""
        with self._setup:
            for attempt in range(attempts):
                try:
                    return call(self.admin)
                except KafkaError as exc:
                    if not exc.retriable or attempt == attempts - 1:
                        raise
                    time.sleep(0.1 * (attempt + 1))

    # -- topics --------------------------------------------------------------------------------------------
    def ensure_topics(self, topics: Sequence[TopicSpec]) -> None:
        """Create the missing topics through the admin client (idempotent; existing ones are left alone)."""
        existing = set(self._ask_admin(lambda admin: admin.list_topics()))
        brokers = len(self._ask_admin(lambda admin: admin.describe_cluster()).get("brokers", [])) or 1
        for spec in topics:
            if spec.partitions < 1:
                raise ValueError(f"topic {spec.name}: partitions must be >= 1")
            if spec.name in existing:
                continue
            new = NewTopic(spec.name, spec.partitions, min(3, brokers), topic_configs=dict(spec.config))
            with contextlib.suppress(TopicAlreadyExistsError):  # created concurrently elsewhere
                self._ask_admin(lambda admin, new=new: admin.create_topics([new], wait_for_metadata=True))

    def _partition_count(self, topic: str) -> int:
        count = self._partition_counts.get(topic)
        if count is not None:
            return count
        with self._setup:
            if topic not in self._partition_counts:
                if topic not in set(self._ask_admin(lambda admin: admin.list_topics())):
                    raise UnknownTopic(f"topic {topic!r} does not exist "
                                       "(create it with ensure_topics / rounds events topics)")
                self._partition_counts[topic] = len(self.producer.partitions_for(topic))
            return self._partition_counts[topic]

    # -- producing -----------------------------------------------------------------------------------------
    def _append(self, topic: str, rows: list[Row]) -> list[Published]:
        """Send the batch, flush once, and return after every record is acknowledged (acks=all)."""
        futures = self._send(topic, rows)
        self.producer.flush(timeout=SEND_TIMEOUT_S)
        return self._settle(futures)

    def _send(self, topic: str, rows: list[Row]) -> list:
        """Hand the records to the producer (its sender thread ships them as batches fill or linger ends)."""
        count = self._partition_count(topic)
        send = self.producer.send
        return [send(topic, value=raw, key=key, partition=partition_for(key.decode(), count))
                for key, raw, _ in rows]

    def _settle(self, futures: list) -> list[Published]:
        """Wait until every record is acknowledged; raises when the broker did not ack one."""
        out = []
        for future in futures:
            # A done future is read directly (get() re-checks with a timer per record); get() waits for one
            # that is not done yet, and raises when the broker did not ack.
            meta = future.value if future.is_done and future.exception is None else future.get(SEND_TIMEOUT_S)
            out.append(Published(meta.topic, meta.partition, meta.offset))
        return out

    # -- consuming -----------------------------------------------------------------------------------------
    def consumer(
        self,
        group_id: str,
        topics: Sequence[str],
        *,
        from_beginning: bool = True,
        on_assign: AssignCallback | None = None,
    ) -> KafkaBusConsumer:
        if not group_id:
            raise ValueError("group_id is required (use reader() for a group-less consumer)")
        for topic in topics:
            self._partition_count(topic)  # UnknownTopic early, as SqlLog does
        return KafkaBusConsumer(
            self, group_id, list(topics), from_beginning=from_beginning, on_assign=on_assign
        )

    def reader(self, topics: Sequence[str]) -> KafkaBusConsumer:
        consumer = KafkaBusConsumer(self, None, [], from_beginning=True, on_assign=None)
        tps = [_ktp(tp) for topic in topics for tp in self.partitions(topic)]
        consumer.kafka.assign(tps)
        consumer.kafka.seek_to_beginning(*tps)
        return consumer

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush()
            self._producer.close()
            self._producer = None
        if self._admin is not None:
            self._admin.close()
            self._admin = None


class _Listener(ConsumerRebalanceListener):
    def __init__(self, on_assign: AssignCallback | None) -> None:
        self.on_assign = on_assign

    def on_partitions_revoked(self, revoked) -> None:
        pass

    def on_partitions_assigned(self, assigned) -> None:
        if self.on_assign is not None:
            self.on_assign({_tp(k) for k in assigned})


class KafkaBusConsumer:
    """A KafkaConsumer in a group (or group-less when group_id is None) speaking the `Consumer` protocol."""

    def __init__(
        self,
        bus: KafkaBus,
        group_id: str | None,
        topics: list[str],
        *,
        from_beginning: bool,
        on_assign: AssignCallback | None,
    ) -> None:
        self.bus, self.group_id = bus, group_id
        self.kafka = KafkaConsumer(
            bootstrap_servers=bus.bootstrap,
            client_id=bus.client_id,
            group_id=group_id,
            auto_offset_reset="earliest" if from_beginning else "latest",
            **CONSUMER_CONFIG,
        )
        if topics:
            self._await_metadata(topics)
            self.kafka.subscribe(topics, listener=_Listener(on_assign))

    def _await_metadata(self, topics: list[str], timeout_s: float = 30.0) -> None:
        """Know every topic's partitions before joining: a group leader without them assigns nothing."""
        deadline = time.monotonic() + timeout_s
        for topic in topics:
            while len(self.kafka.partitions_for_topic(topic)) < len(self.bus.partitions(topic)):
                if time.monotonic() > deadline:
                    raise UnknownTopic(f"no partition metadata for {topic!r} after {timeout_s}s")
                time.sleep(0.1)

    def _keep_rejoining(self) -> None:
        """Keep kafka-python awaiting a join it already sent, so the assignment it brings is applied.

        kafka-python 3.0.x rejoins when the metadata changes under the assignment it computed, without setting
        its own `rejoin_needed`; a poll that times out mid-join leaves the join in flight, and once the leader
        recomputes the assignment the next poll no longer sees a rejoin to wait for: the assignment in the
        SyncGroup answer is never applied and the member fetches nothing, heartbeating, for ever (seen on a
        fresh group whose topic metadata arrived during its first join). A join in flight is a rejoin."""
        coordinator = getattr(self.kafka, "_coordinator", None)
        joining = coordinator is not None and getattr(coordinator, "_join_task", None) is not None
        if joining and not coordinator.rejoin_needed:
            log.debug("group %s: a join is in flight; waiting for its assignment", self.group_id)
            coordinator.request_rejoin()

    def poll(self, timeout_s: float = 1.0, max_records: int = 500) -> list[Record]:
        if self.group_id is not None:
            self._keep_rejoining()
        batches = self.kafka.poll(timeout_ms=int(timeout_s * 1000), max_records=max_records)
        return [  # decoded with the collector as the caller has it (a projection's batch pauses it)
            to_record(m.topic, m.partition, m.offset, m.key, m.value, m.timestamp, self.bus.catalog)
            for ktp in sorted(batches, key=lambda k: (k.topic, k.partition))
            for m in batches[ktp]
        ]

    def assignment(self) -> set[TopicPartition]:
        return {_tp(k) for k in self.kafka.assignment()}

    def position(self, tp: TopicPartition) -> int:
        return self.kafka.position(_ktp(tp))

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        self.kafka.seek(_ktp(tp), offset)

    def seek_to_beginning(self, tps: Sequence[TopicPartition] | None = None) -> None:
        self.kafka.seek_to_beginning(*(_ktp(tp) for tp in (tps or ())))

    def commit(self, offsets: dict[TopicPartition, int]) -> None:
        if self.group_id is None:
            raise RuntimeError("a group-less reader cannot commit offsets")
        self.kafka.commit({_ktp(tp): OffsetAndMetadata(off, "", -1) for tp, off in offsets.items()})

    def committed(self, tp: TopicPartition) -> int | None:
        if self.group_id is None:
            return None
        return self.kafka.committed(_ktp(tp))

    def end_offsets(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        ends = self.kafka.end_offsets([_ktp(tp) for tp in tps])
        return {_tp(k): v for k, v in ends.items()}

    def close(self) -> None:
        self.kafka.close()
