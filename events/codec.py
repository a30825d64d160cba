"""Publish-time checks and read-time decoding shared by both bus backends.

Publishing rejects bad input with an EventError before anything is written: unknown type, missing or invalid
attribute, invalid payload, oversized event, invalid JSON on the raw path. Reading never raises: bytes that
are not a valid catalogued event become `Record.event = None` so the consumer can dead-letter them.
"""

from __future__ import annotations

from events.bus import Record
from events.catalog import CATALOG, Catalog
from events.envelope import CloudEvent, InvalidEvent

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
