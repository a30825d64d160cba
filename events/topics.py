"""Rounds' topics, their configuration, and the partitioner both backends share.

- `rounds.sessions`: everything belonging to a session, keyed by session id (one session is totally ordered);
- `rounds.scores`: scorer output, keyed by session id;
- `rounds.fhir-changes`: id-only FHIR change notifications, keyed by "ResourceType/id";
- `rounds.deadletter`: records a consumer could not process, keyed like the original record.
All keep full history (delete policy, retention.ms=-1, never compacted) and are created explicitly by
`Bus.ensure_topics`, never auto-created.
"""

from __future__ import annotations

from functools import lru_cache

from events.bus import TopicSpec

SESSIONS = "rounds.sessions"
SCORES = "rounds.scores"
FHIR_CHANGES = "rounds.fhir-changes"
DEADLETTER = "rounds.deadletter"
ALL_TOPICS = (SESSIONS, SCORES, FHIR_CHANGES, DEADLETTER)


def topic_specs(partitions: int = 3) -> list[TopicSpec]:
    """Specs of every Rounds topic with `partitions` partitions each (ROUNDS_KAFKA_PARTITIONS)."""
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    return [TopicSpec(name=name, partitions=partitions) for name in ALL_TOPICS]


@lru_cache(maxsize=65536)  # keys repeat (one per session): hash each once
def partition_for(key: str, partitions: int) -> int:
    """Kafka's default partitioner (murmur2 of the UTF-8 key, positive, modulo the partition count).

    Both backends use it, so a key lands on the same partition number on Kafka and on the SQL log.
    """
    return (murmur2(key.encode()) & 0x7FFFFFFF) % partitions


_M, _MASK = 0x5BD1E995, 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """MurmurHash2 as Kafka's Java client computes it (Utils.murmur2, seed 0x9747b28c), unsigned 32-bit.

    Here rather than imported from kafka-python: importing its partitioner imports the whole client (~0.3 s
    per process), which the embedded SQL log, every re-score member among them, never uses."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    body = length - length % 4
    for i in range(0, body, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    extra = length % 4
    if extra >= 3:
        h ^= data[body + 2] << 16
    if extra >= 2:
        h ^= data[body + 1] << 8
    if extra >= 1:
        h ^= data[body]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h
