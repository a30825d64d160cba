"""The one bus interface. `KafkaBus` (events/kafka_bus.py) and `SqlLog` (events/sql_log.py) implement it.

Semantics shared by both backends (and tested by one behavioural suite):
- a topic has N partitions; a record goes to a stable hash of its key, so one key is totally ordered;
- `publish` returns only when the record is durable (Kafka: acks=all, idempotent producer);
- consumers in one group split the partitions; positions are explicit (`seek`) and committed explicitly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from events.envelope import CloudEvent


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int = 3
    # Event topics keep full history: delete policy, no time limit, never compacted.
    config: tuple[tuple[str, str], ...] = (("cleanup.policy", "delete"), ("retention.ms", "-1"))


@dataclass(frozen=True)
class TopicPartition:
    topic: str
    partition: int


class Record(NamedTuple):
    """One consumed record. A NamedTuple, not a frozen dataclass: built per record read, and a frozen
    dataclass's __init__ (one object.__setattr__ per field) cost ~2 us of a consumer's ~40 us per event."""

    topic: str
    partition: int
    offset: int
    key: str
    event: CloudEvent | None  # None when the stored bytes are not a valid CloudEvent (-> dead letter)
    raw: bytes
    timestamp_ms: int


class Published(NamedTuple):
    """Where a published record landed (a NamedTuple like Record: one per record published)."""

    topic: str
    partition: int
    offset: int


AssignCallback = Callable[[set[TopicPartition]], None]


class UnknownTopic(LookupError):
    """A topic that `ensure_topics` never created (topics are never auto-created)."""


class Consumer(Protocol):
    def poll(self, timeout_s: float = 1.0, max_records: int = 500) -> list[Record]: ...

    def assignment(self) -> set[TopicPartition]: ...

    def seek(self, tp: TopicPartition, offset: int) -> None: ...

    def seek_to_beginning(self, tps: Sequence[TopicPartition] | None = None) -> None: ...

    def commit(self, offsets: dict[TopicPartition, int]) -> None:
        """Store the group's next-offset-to-read per partition."""
        ...

    def committed(self, tp: TopicPartition) -> int | None: ...

    def end_offsets(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]: ...

    def close(self) -> None: ...


class Bus(Protocol):
    def ensure_topics(self, topics: Sequence[TopicSpec]) -> None: ...

    def publish(self, topic: str, event: CloudEvent, key: str) -> Published: ...

    def publish_many(self, topic: str, items: Sequence[tuple[str, CloudEvent]]) -> list[Published]: ...

    def publish_chunks(
        self, topic: str, chunks: Iterable[Sequence[tuple[str, CloudEvent]]]
    ) -> Iterator[list[Published]]:
        """`publish_many` per chunk, pipelined (chunk n+1 is sent while chunk n's acks are awaited); yields
        each chunk's positions in order once that chunk is durable."""
        ...

    def publish_raw(self, topic: str, raw: bytes, key: str) -> Published:
        """Publish serialised CloudEvent JSON (e.g. `rounds events load`), validated like `publish`."""
        ...

    def publish_raw_many(self, topic: str, items: Sequence[tuple[str, bytes]]) -> list[Published]:
        """Batch form of `publish_raw` (key, bytes); all-or-nothing validation before anything is written."""
        ...

    def partitions(self, topic: str) -> list[TopicPartition]:
        """The topic's partitions (raises UnknownTopic)."""
        ...

    def reader(self, topics: Sequence[str]) -> Consumer:
        """A group-less consumer assigned every partition of `topics` from the beginning (dump, tools).

        It joins no group, so it never disturbs a group's members; `commit` raises.
        """
        ...

    def consumer(
        self,
        group_id: str,
        topics: Sequence[str],
        *,
        from_beginning: bool = True,
        on_assign: AssignCallback | None = None,
    ) -> Consumer: ...

    def close(self) -> None: ...
