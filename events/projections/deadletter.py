"""Poison events go to the dead-letter topic with the error and original coordinates; the consumer moves on.

The dead-letter event's id is derived from (group, topic, partition, offset): if the consumer dies after
publishing it but before committing its position, the retry publishes the same id again (a duplicate that
readers drop), never a second distinct failure.
"""

from __future__ import annotations

import uuid

from events.bus import Record
from events.catalog import CATALOG
from events.envelope import CloudEvent
from events.payloads import DeadLetter

DEADLETTER_TYPE = "rounds.event.deadlettered"
_NAMESPACE = uuid.UUID("0b5c3f0e-8a51-4b8e-9d7e-4f8f3c1a2d60")


def dead_letter_event(group_id: str, record: Record, error: str) -> CloudEvent:
    return CATALOG.make(
        DEADLETTER_TYPE,
        DeadLetter.of(record, group_id, error),
        source=f"/rounds/consumers/{group_id}",
        id=str(uuid.uuid5(_NAMESPACE, f"{group_id}|{record.topic}|{record.partition}|{record.offset}")),
    )
