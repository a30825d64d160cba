"""The repo's own Kafka broker works with kafka-python: topics, idempotent produce, groups, offsets, seek."""

from __future__ import annotations

import time
import uuid

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

pytestmark = pytest.mark.kafka


def test_round_trip_with_list_offsets_and_seek(kafka_bootstrap: str) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
    # Topic metadata reaches the broker's cache asynchronously: wait (bounded) until it is listed.
    deadline = time.monotonic() + 30
    while topic not in admin.list_topics():
        assert time.monotonic() < deadline, f"topic {topic} never listed"
        time.sleep(0.2)

    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all", enable_idempotence=True)
    sent = [f"m{i}".encode() for i in range(20)]
    for i, value in enumerate(sent):
        producer.send(topic, key=f"k{i % 3}".encode(), value=value)
    producer.flush(timeout=30)
    producer.close()

    consumer = KafkaConsumer(
        bootstrap_servers=kafka_bootstrap,
        group_id=f"g-{topic}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10000,
    )
    consumer.subscribe([topic])
    got = []
    for msg in consumer:
        got.append((msg.key, msg.value))
        if len(got) == len(sent):
            break
    assert sorted(v for _, v in got) == sorted(sent)
    # Per key order is kept (all values of one key land on one partition).
    for key in {k for k, _ in got}:
        values = [v for k, v in got if k == key]
        assert values == sorted(values, key=lambda b: int(b[1:]))
    consumer.commit()

    parts = [TopicPartition(topic, p) for p in (0, 1)]
    end = consumer.end_offsets(parts)
    begin = consumer.beginning_offsets(parts)
    assert sum(end.values()) - sum(begin.values()) == len(sent)
    committed = sum(consumer.committed(tp) or 0 for tp in parts)
    assert committed == len(sent)

    # Seek back to the beginning and read everything again.
    consumer.unsubscribe()
    consumer.assign(parts)
    consumer.seek_to_beginning(*parts)
    again = []
    for msg in consumer:
        again.append(msg.value)
        if len(again) == len(sent):
            break
    assert sorted(again) == sorted(sent)
    consumer.close()
    admin.delete_topics([topic])
    admin.close()
