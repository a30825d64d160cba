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

from kafka.partitioner.default import murmur2

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
