"""Export and import of event logs as JSON lines (one structured-mode CloudEvent per line).

`dump` reads with a group-less reader (`Bus.reader`), so it never joins or disturbs a consumer group. `load`
re-publishes through `Bus.publish_raw` (each line is validated; older registered schema versions pass)
to the topic and key the catalog routes each event to, skipping events whose `source`+`id` is already in the
target topic, so loading the same file twice publishes nothing the second time.

A log carries its blobs (events/blobs.py: bodies, message texts, resource lists and sandbox states too large
for an event): given the blob store's engine, `dump` writes each stored blob an event names
(`sha256:<hex>` anywhere in it) once, as a blob line `{"roundsBlob": ref, "dataBase64": ...}` BEFORE the
first event naming it, and `load` stores a blob line (its digest checked) before publishing what follows,
so a reader of the loaded log never meets a reference it cannot resolve.
"""

from __future__ import annotations

import base64
import re
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

import orjson
from sqlalchemy import Engine, inspect

from events.blobs import BLOBS, blob_ref, read, write
from events.bus import Bus, Record, TopicPartition
from events.catalog import CATALOG, Catalog
from events.codec import encode_raw
from events.envelope import EventError
from events.topics import SCORES, SESSIONS, partition_for
from foundation.gcpause import gc_paused

SESSION_TOPICS = (SESSIONS, SCORES)


def read_log(
    bus: Bus,
    topics: Iterable[str],
    *,
    session: str | None = None,
    from_beginning: bool = True,
    follow: bool = False,
    idle_timeout_s: float | None = None,
) -> Iterator[Record]:
    """Records of `topics` in partition order (one session's records in log order).

    Without `follow`, stops at the end offsets seen at the start. With `session`, only the session's
    partition of each topic is read and only events whose subject is the session are yielded.
    """
    topics = list(topics)
    reader = bus.reader(topics)
    try:
        tps = [tp for topic in topics for tp in bus.partitions(topic)]
        ends = reader.end_offsets(tps)
        wanted = [
            tp for tp in tps if session is None or tp.partition == partition_for(session, _count(tps, tp))
        ]
        for tp in tps:
            if tp not in wanted or not from_beginning:
                reader.seek(tp, ends[tp])
        last_data = time.monotonic()
        while True:
            if not follow and all(reader.position(tp) >= ends[tp] for tp in wanted):
                return
            if idle_timeout_s is not None and time.monotonic() - last_data > idle_timeout_s:
                return
            for record in reader.poll(timeout_s=0.5):
                last_data = time.monotonic()
                if TopicPartition(record.topic, record.partition) not in wanted:
                    continue
                if not follow and record.offset >= ends[TopicPartition(record.topic, record.partition)]:
                    continue
                if session is None or (record.event is not None and record.event.subject == session):
                    yield record
    finally:
        reader.close()


def _count(tps: list[TopicPartition], tp: TopicPartition) -> int:
    return sum(1 for other in tps if other.topic == tp.topic)


def record_line(record: Record) -> bytes | None:
    """The JSON line for a record (None for bytes that are not a valid event: they cannot be re-loaded)."""
    if record.event is None:
        return None
    raw = record.raw
    return (orjson.dumps(orjson.loads(raw)) if b"\n" in raw else raw) + b"\n"


BLOB_KEY = b'{"roundsBlob":'  # how a blob line starts (events start with their own attributes)
_REF = re.compile(rb"sha256:[0-9a-f]{64}")
CHUNK = 500  # event lines whose blobs are looked up at once


def blob_line(ref: str, content: bytes) -> bytes:
    return orjson.dumps({"roundsBlob": ref, "dataBase64": base64.b64encode(content).decode()}) + b"\n"


class _BlobsOut:
    """The blob lines of a chunk of event lines: every stored blob they name, not written before."""

    def __init__(self, engine: Engine | None) -> None:
        self.engine = engine if engine is not None and inspect(engine).has_table(BLOBS.name) else None
        self.written: set[str] = set()
        self.absent: set[str] = set()
        self.count = 0

    def lines(self, events: list[bytes]) -> list[bytes]:
        if self.engine is None:
            return []
        named = {m.decode() for line in events for m in _REF.findall(line)} - self.written - self.absent
        if not named:
            return []
        with self.engine.connect() as conn:
            found = read(conn, named)
        self.absent |= named - found.keys()  # digests of inline bodies: not stored
        self.written |= found.keys()
        self.count += len(found)
        return [blob_line(ref, found[ref]) for ref in sorted(found)]


def dump(bus: Bus, topics: Iterable[str], out: BinaryIO, *, blobs: Engine | None = None,
         **options) -> tuple[int, int]:
    """Write records as JSON lines, each chunk preceded by the blobs it names (from `blobs`, the engine of
    the blob store; None: events only); returns (events written, skipped invalid)."""
    written = skipped = 0
    carried = _BlobsOut(blobs)
    chunk: list[bytes] = []

    def flush() -> None:
        out.writelines(carried.lines(chunk))
        out.writelines(chunk)
        chunk.clear()

    for record in read_log(bus, topics, **options):
        line = record_line(record)
        if line is None:
            skipped += 1
            continue
        chunk.append(line)
        written += 1
        if len(chunk) >= CHUNK or options.get("follow"):
            flush()
    flush()
    out.flush()
    return written, skipped


@dataclass
class LoadReport:
    published: int = 0
    already_present: int = 0
    blobs: int = 0  # blob lines stored (or already there)
    rejected: list[str] = field(default_factory=list)  # "line N: reason"


def existing_ids(bus: Bus, topic: str) -> set[tuple[str, str]]:
    """(source, id) of every valid event in `topic` (a full read: load is a tool, not a hot path)."""
    return {(r.event.source, r.event.id) for r in read_log(bus, [topic]) if r.event is not None}


def load(bus: Bus, lines: Iterable[bytes], catalog: Catalog = CATALOG, batch: int = 500, *,
         blobs: Engine | None = None) -> LoadReport:
    """Re-publish exported events idempotently, batched per topic; bad lines are reported, not published.
    Blob lines are stored in `blobs` (the blob store's engine) as they are read, before any later event is
    published; without it a blob line is rejected. A batch job (`rounds events load`): the cycle collector
    is paused while it runs (foundation/gcpause.py)."""
    with gc_paused():
        return _load(bus, lines, catalog, batch, blobs)


def _store_blob(line: bytes, blobs: Engine | None) -> None:
    """Store one blob line; ValueError when it is malformed, its digest wrong, or there is no store."""
    if blobs is None:
        raise ValueError("a blob line, but no blob store to load it into")
    try:
        doc = orjson.loads(line)
        ref, content = doc["roundsBlob"], base64.b64decode(doc["dataBase64"], validate=True)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"malformed blob line: {exc}") from exc
    if blob_ref(content) != ref:
        raise ValueError(f"blob {str(ref)[:20]}… does not match its content")
    with blobs.begin() as conn:
        write(conn, content)


def _load(bus: Bus, lines: Iterable[bytes], catalog: Catalog, batch: int, blobs: Engine | None) -> LoadReport:
    report = LoadReport()
    seen: dict[str, set[tuple[str, str]]] = {}
    pending: dict[str, list[tuple[str, bytes]]] = defaultdict(list)

    def flush(topic: str) -> None:
        if pending[topic]:
            bus.publish_raw_many(topic, pending[topic])
            report.published += len(pending[topic])
            pending[topic] = []

    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if not line:
            continue
        if line.startswith(BLOB_KEY):
            try:
                _store_blob(line, blobs)
                report.blobs += 1
            except ValueError as exc:
                report.rejected.append(f"line {number}: {exc}")
            continue
        try:
            event = encode_raw(line, catalog)
            topic, key = catalog.route(event)
        except EventError as exc:
            report.rejected.append(f"line {number}: {exc}")
            continue
        if topic not in seen:
            seen[topic] = existing_ids(bus, topic)
        if (event.source, event.id) in seen[topic]:
            report.already_present += 1
            continue
        seen[topic].add((event.source, event.id))
        pending[topic].append((key, line))
        if len(pending[topic]) >= batch:
            flush(topic)
    for topic in list(pending):
        flush(topic)
    return report
