"""Tables a projection consumer commits together with its projection rows (the exactly-once effect).

`ConsumerPosition` is the group's next offset per partition — the consumer seeks here on assignment, never to
Kafka's committed offsets. `ProcessedEvent` remembers applied events by their CloudEvents dedupe key
(`source` + `id`), so a duplicate published under a new offset (outbox relay crash, `events load`) has no
effect.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from rounds.db import Base


class ConsumerPosition(Base):
    __tablename__ = "event_consumer_positions"

    group_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    topic: Mapped[str] = mapped_column(String(200), primary_key=True)
    partition: Mapped[int] = mapped_column(Integer, primary_key=True)
    next_offset: Mapped[int] = mapped_column(BigInteger)


class ProcessedEvent(Base):
    """Primary key ordered (group, id, source) so `event_id IN (...)` per batch is one index range scan."""

    __tablename__ = "event_processed"

    group_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    event_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    source: Mapped[str] = mapped_column(String(500), primary_key=True)
