"""Poison events go to the dead-letter topic with the error and original coordinates; the consumer moves on.

The dead-letter event's id is derived from (group, topic, partition, offset): if the consumer dies after
publishing it but before committing its position, the retry publishes the same id again (a duplicate that
readers drop), never a second distinct failure.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping

from events.bus import Bus, Record, TopicPartition
from events.catalog import CATALOG, UnknownEventType
from events.envelope import CloudEvent
from events.payloads import DeadLetter

log = logging.getLogger(__name__)

DEADLETTER_TYPE = DeadLetter.TYPE
_NAMESPACE = uuid.UUID("0b5c3f0e-8a51-4b8e-9d7e-4f8f3c1a2d60")


def dead_letter_event(group_id: str, record: Record, error: str) -> CloudEvent:
    return CATALOG.make(
        DEADLETTER_TYPE,
        DeadLetter.of(record, group_id, error),
        source=f"/rounds/consumers/{group_id}",
        id=str(uuid.uuid5(_NAMESPACE, f"{group_id}|{record.topic}|{record.partition}|{record.offset}")),
    )


def known_event_type(event_type: str) -> bool:
    try:
        CATALOG.spec(event_type)
    except UnknownEventType:
        return False
    return True


class DeadLetters:
    """One group's poison decisions (made without the database) and dead-letter publishing."""

    def __init__(self, bus: Bus, group_id: str, topic: str, *, publish: bool = True,
                 known_type: Callable[[str], bool] = known_event_type) -> None:
        self.bus, self.group_id, self.topic = bus, group_id, topic
        self.publish_letters, self.known_type = publish, known_type
        self._lettered: set[tuple[str, int, int]] = set()  # published, position not yet committed past
        self._known_types: set[str] = set()

    def reason(self, record: Record, poison: str | None) -> str | None:
        """Why `record` goes to the dead-letter topic, if it does: the projection's error (`poison`), bytes
        that are not a CloudEvent, a type the catalog does not know."""
        if poison is not None:
            return poison
        event = record.event
        if event is None:
            return "undecodable record: not a valid CloudEvent"
        if event.type not in self._known_types:  # types only ever get registered: remember the known ones
            if not self.known_type(event.type):
                return f"unknown event type {event.type!r}"
            self._known_types.add(event.type)
        return None

    def publish(self, dead: list[tuple[Record, str]]) -> None:
        """Publish before the position moves, outside the batch's transaction (the SQL log may share the
        database). A batch retried event by event does not publish its letters twice; a crash before the
        commit does, under the same event id."""
        for record, reason in dead:
            coordinates = (record.topic, record.partition, record.offset)
            if coordinates in self._lettered:
                continue
            self._lettered.add(coordinates)
            log.warning("group %s dead-letters %s/%s@%s: %s", self.group_id, record.topic, record.partition,
                        record.offset, reason)
            if self.publish_letters:
                letter = dead_letter_event(self.group_id, record, reason)
                self.bus.publish(self.topic, letter, record.key or "-")

    def forget_committed(self, positions: Mapping[TopicPartition, int | None]) -> None:
        """Drop the memory of letters whose records the group's committed positions have moved past."""
        if self._lettered:
            self._lettered = {c for c in self._lettered
                              if c[2] >= (positions.get(TopicPartition(c[0], c[1])) or 0)}
