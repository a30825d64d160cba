"""Topics and the shared partitioner: Kafka's murmur2 (Java client test vectors), full-history configs."""

from __future__ import annotations

import pytest

from events.topics import ALL_TOPICS, partition_for, topic_specs

# org.apache.kafka.common.utils.UtilsTest#testMurmur2: key -> signed 32-bit murmur2.
JAVA_MURMUR2 = {
    "21": -973932308,
    "foobar": -790332482,
    "a-little-bit-long-string": -985981536,
    "a-little-bit-longer-string": -1486304829,
    "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    "abc": 479470107,
}


@pytest.mark.parametrize("partitions", [1, 3, 7, 12])
def test_partition_matches_the_java_client(partitions: int) -> None:
    for key, signed in JAVA_MURMUR2.items():
        # Java: Utils.toPositive(Utils.murmur2(keyBytes)) % numPartitions
        assert partition_for(key, partitions) == (signed & 0x7FFFFFFF) % partitions


def test_murmur2_is_kafka_pythons() -> None:
    """events.topics keeps its own murmur2 (no kafka import on the SQL log): the same hash as kafka-python's
    partitioner over keys of every length mod 4, ASCII and not."""
    import random

    from kafka.partitioner.default import murmur2 as kafka_murmur2

    from events.topics import murmur2

    rng = random.Random(7)
    keys = [bytes(rng.randrange(256) for _ in range(n)) for n in range(0, 70) for _ in range(20)]
    keys += [f"session-{i}".encode() for i in range(500)] + ["病人/患者-1".encode()]
    for key in keys:
        assert murmur2(key) == kafka_murmur2(key), key


def test_topic_specs_keep_full_history() -> None:
    specs = topic_specs(5)
    assert [s.name for s in specs] == list(ALL_TOPICS)
    assert ALL_TOPICS == ("rounds.sessions", "rounds.scores", "rounds.fhir-changes", "rounds.deadletter")
    for spec in specs:
        assert spec.partitions == 5
        assert dict(spec.config) == {"cleanup.policy": "delete", "retention.ms": "-1"}
    with pytest.raises(ValueError):
        topic_specs(0)
