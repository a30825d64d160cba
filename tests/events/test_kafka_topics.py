"""Kafka topics are created by the admin client with full-history configuration; never auto-created."""

from __future__ import annotations

import uuid

import pytest
from kafka.admin import ConfigResource, ConfigResourceType

from events.bus import TopicSpec, UnknownTopic
from events.kafka_bus import KafkaBus
from tests.events.conftest import tool_call

pytestmark = pytest.mark.kafka


def test_ensure_topics_creates_full_history_topics_idempotently(kafka_bootstrap: str) -> None:
    bus = KafkaBus(kafka_bootstrap)
    name = f"test.cfg.{uuid.uuid4().hex[:8]}"
    bus.ensure_topics([TopicSpec(name, 4)])
    bus.ensure_topics([TopicSpec(name, 6)])  # idempotent: existing topic untouched
    assert len(bus.partitions(name)) == 4
    result = bus.admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
    configs = result["topic"][name]
    assert configs["cleanup.policy"]["value"] == "delete" and configs["retention.ms"]["value"] == "-1"
    missing = f"test.missing.{uuid.uuid4().hex[:8]}"
    with pytest.raises(UnknownTopic):
        bus.publish(missing, tool_call("sess-k1", 0), "sess-k1")
    assert missing not in bus.admin.list_topics(), "publishing never auto-creates a topic"
    bus.close()
