"""Publish-time checks and read-time decoding shared by both bus backends.

Publishing rejects bad input with an EventError before anything is written: unknown type, missing or invalid
attribute, invalid payload, oversized event, invalid JSON on the raw path. Reading never raises: bytes that
are not a valid catalogued event become `Record.event = None` so the consumer can dead-letter them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from events.bus import Published, Record, TopicPartition
from events.catalog import CATALOG, Catalog
from events.envelope import CloudEvent, InvalidEvent

# What a backend appends: (key bytes, event bytes, the parsed event or None for bytes written unchecked).
Row = tuple[bytes, bytes, CloudEvent | None]

MAX_KEY_CHARS = 512


def check_key(key: str) -> bytes:
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS:
        raise InvalidEvent(
            f"record key must be a non-empty string of at most {MAX_KEY_CHARS} chars, got {key!r}"
        )
    return key.encode()


def encode(event: CloudEvent, catalog: Catalog = CATALOG) -> bytes:
    """Validate `event` against the catalog and serialise it (raises EventError)."""
    if not isinstance(event, CloudEvent):
        raise InvalidEvent(f"publish takes a CloudEvent, got {type(event).__name__}")
    if not catalog.is_valid(event):
        catalog.validate(event)
    return event.to_bytes()


def encode_raw(raw: bytes, catalog: Catalog = CATALOG) -> CloudEvent:
    """Validate serialised CloudEvent JSON and return the parsed event (the bytes are stored as given)."""
    if not isinstance(raw, bytes | bytearray | memoryview):
        raise InvalidEvent(f"publish_raw takes bytes, got {type(raw).__name__}")
    event = CloudEvent.from_bytes(bytes(raw))
    catalog.validate(event, allow_old=True)
    return event


def to_record(
    topic: str,
    partition: int,
    offset: int,
    key: bytes | str | None,
    raw: bytes,
    timestamp_ms: int,
    catalog: Catalog = CATALOG,
) -> Record:
    """A Record with its event decoded (upcast to the current version) or None when the bytes are bad."""
    if isinstance(key, bytes):
        key = key.decode(errors="replace")
    return Record(topic, partition, offset, key or "", catalog.decode(raw), raw, timestamp_ms)


class CheckedPublisher:
    """The publish half of `Bus` shared by both backends: every input is checked before `_append` sees it."""

    catalog: Catalog = CATALOG

    def _append(self, topic: str, rows: list[Row]) -> list[Published]:
        raise NotImplementedError

    def _send(self, topic: str, rows: list[Row]) -> Any:
        """Start appending `rows`; `_settle` of the result returns when they are durable. A backend that has
        nothing to overlap (the SQL log commits in `_append`) appends here and settles at once."""
        return self._append(topic, rows)

    def _settle(self, sent: Any) -> list[Published]:
        return sent

    def _partition_count(self, topic: str) -> int:
        raise NotImplementedError

    def partitions(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in range(self._partition_count(topic))]

    def publish(self, topic: str, event: CloudEvent, key: str) -> Published:
        return self.publish_many(topic, [(key, event)])[0]

    def publish_many(self, topic: str, items: Sequence[tuple[str, CloudEvent]]) -> list[Published]:
        # No collector pause here: the FHIR API publishes through this (recorder, relay) and a served process
        # keeps its collector on; batch jobs pause where they start (foundation/gcpause.py).
        rows = [(check_key(key), encode(event, self.catalog), event) for key, event in items]
        return self._append(topic, rows) if rows else []

    def publish_chunks(
        self, topic: str, chunks: Iterable[Sequence[tuple[str, CloudEvent]]]
    ) -> Iterator[list[Published]]:
        """`publish_many` per chunk, pipelined: yields each chunk's `Published` in order once all of it is
        durable, but checks and sends chunk n+1 (and builds it, when `chunks` is a generator) while chunk
        n's acknowledgements are on their way — `publish_many` in a loop leaves the producer idle during
        each flush. Each chunk is validated as a whole before any of it is sent; an error (an invalid chunk,
        a failed send) is raised when reached, and the chunks before it stay published."""
        pending: Any = None
        iterator = iter(chunks)
        while True:
            failure = None
            try:
                chunk = next(iterator)
            except StopIteration:
                break
            try:
                rows = [(check_key(key), encode(event, self.catalog), event) for key, event in chunk]
                sent = self._send(topic, rows) if rows else []
            except Exception as exc:  # raised after the chunk before it is settled and yielded
                failure = exc
            if pending is not None:
                yield self._settle(pending) if pending else []
            if failure is not None:
                raise failure
            pending = sent
        if pending is not None:
            yield self._settle(pending) if pending else []

    def publish_raw(self, topic: str, raw: bytes, key: str) -> Published:
        return self.publish_raw_many(topic, [(key, raw)])[0]

    def publish_raw_many(self, topic: str, items: Sequence[tuple[str, bytes]]) -> list[Published]:
        rows = [(check_key(key), bytes(raw), encode_raw(raw, self.catalog)) for key, raw in items]
        return self._append(topic, rows) if rows else []
