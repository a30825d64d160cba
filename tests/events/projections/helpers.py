"""Shared by the consumer and fault tests: bus + database per backend, session event streams, snapshots."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from sqlalchemy import Engine, select

from events.bus import Bus, TopicSpec
from events.catalog import CATALOG
from events.envelope import CloudEvent
from events.payloads import EhrRequest, EhrResponse, SessionEnded, SessionStarted, communication
from events.projections.projection import Projection
from foundation.db import make_engine
from rounds.migrate import upgrade
from rounds.settings import Settings
from tests.wiring import bus_on

SOURCE = "/tests/consumers"
BACKENDS = ["sql-sqlite", "sql-postgres", "kafka"]


@dataclass
class Env:
    """One backend under test; topic names are unique per test so tests never see each other's records."""

    name: str
    bus: Bus
    engine: Engine
    settings: Settings
    sessions: str
    deadletter: str
    fhir_changes: str

    @property
    def topics(self) -> tuple[str, ...]:
        return (self.sessions,)


def make_env(backend: str, database_url: str, kafka_bootstrap: str | None = None, partitions: int = 3) -> Env:
    upgrade(database_url)
    settings = Settings(database_url=database_url, bus="kafka" if backend == "kafka" else "sql",
                        kafka_bootstrap=kafka_bootstrap, kafka_partitions=partitions)
    bus = bus_on(settings)
    tag = uuid.uuid4().hex[:10]
    names = {kind: f"t{tag}.{kind}" for kind in ("sessions", "deadletter", "fhir-changes")}
    bus.ensure_topics([TopicSpec(name=n, partitions=partitions) for n in names.values()])
    return Env(backend, bus, make_engine(database_url), settings, names["sessions"], names["deadletter"],
               names["fhir-changes"])


def close_env(env: Env) -> None:
    env.bus.close()
    env.engine.dispose()


def session_id() -> str:
    return f"s-{uuid.uuid4().hex[:12]}"


def session_events(sid: str, turns: int = 2) -> list[CloudEvent]:
    """A realistic session: started, doctor/assistant turns each with one EHR call, ended."""
    events = [CATALOG.make("rounds.session.started", SessionStarted(assistant="test-llm"), source=SOURCE,
                           subject=sid)]
    for turn in range(turns):
        doctor = communication(f"{sid}-d{turn}", "doctor", ["assistant"], f"question {turn}")
        events.append(CATALOG.make("rounds.message.doctor", doctor, source=SOURCE, subject=sid))
        request_id = f"{sid}-q{turn}"
        events.append(CATALOG.make("rounds.ehr.request", EhrRequest(request_id=request_id, method="GET",
                                   url=f"Observation?patient=p{turn}"), source=SOURCE, subject=sid))
        events.append(CATALOG.make("rounds.ehr.response", EhrResponse(request_id=request_id, status=200,
                                   latency_ms=3.5), source=SOURCE, subject=sid))
        answer = communication(f"{sid}-a{turn}", "assistant", ["doctor"], f"answer {turn}",
                               in_response_to=[f"{sid}-d{turn}"])
        events.append(CATALOG.make("rounds.message.assistant", answer, source=SOURCE, subject=sid))
    events.append(CATALOG.make("rounds.session.ended", SessionEnded(reason="completed", turns=2 * turns),
                               source=SOURCE, subject=sid))
    return [e.model_copy(update={"sequence": i + 1}) for i, e in enumerate(events)]


def interleave(streams: list[list[CloudEvent]]) -> Iterator[tuple[str, CloudEvent]]:
    """Round-robin over sessions (each session's own order kept), as concurrent sessions would publish."""
    longest = max(len(s) for s in streams)
    for i in range(longest):
        for stream in streams:
            if i < len(stream):
                yield stream[i].subject, stream[i]


def publish_sessions(env: Env, count: int, turns: int = 2) -> dict[str, list[CloudEvent]]:
    streams = {session_id(): None for _ in range(count)}
    for sid in streams:
        streams[sid] = session_events(sid, turns)
    env.bus.publish_many(env.sessions, list(interleave(list(streams.values()))))
    return streams


def snapshot(engine: Engine, projection: Projection) -> dict[str, list[tuple]]:
    """Every row of every projection table in primary-key order: equal snapshots = identical projections."""
    out = {}
    with engine.connect() as conn:
        for base, table in projection.tables.items():
            rows = conn.execute(select(table).order_by(*table.primary_key.columns)).all()
            out[base] = [tuple(row) for row in rows]
    return out


def append_raw(env: Env, topic: str, key: str, raw: bytes) -> None:
    """Write bytes the bus refuses at publish (poison) straight into the log, as a foreign producer could."""
    from events.topics import partition_for

    partition = partition_for(key, len(env.bus.partitions(topic)))
    if env.name == "kafka":
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=env.settings.kafka_bootstrap)
        producer.send(topic, key=key.encode(), value=raw, partition=partition).get(timeout=30)
        producer.close()
        return
    from sqlalchemy import update

    from events.sql_models import LogPartition, LogRecord

    with env.engine.begin() as conn:
        end = conn.execute(
            update(LogPartition).where(LogPartition.topic == topic, LogPartition.partition == partition)
            .values(next_offset=LogPartition.next_offset + 1).returning(LogPartition.next_offset)
        ).scalar_one()
        conn.execute(LogRecord.__table__.insert().values(
            topic=topic, partition=partition, offset=end - 1, key=key, payload=raw, timestamp_ms=0))


def read_all(env: Env, topic: str, expected: int, timeout_s: float = 30) -> list:
    """Every record of `topic` (waits until `expected` have arrived)."""
    import time

    reader = env.bus.reader([topic])
    records: list = []
    deadline = time.monotonic() + timeout_s
    while len(records) < expected and time.monotonic() < deadline:
        records.extend(reader.poll(timeout_s=0.5, max_records=1000))
    records.extend(reader.poll(timeout_s=0.3, max_records=1000))  # anything beyond `expected`
    reader.close()
    return records
