"""Transactional outbox: events committed in the same database transaction as the rows they announce.

A writer (the FHIR store's change listener, a projection handler) calls `append(conn, topic, items)` inside
its own transaction; each item becomes an `OutboxEntry` holding the serialised CloudEvent. `events/relay.py`
publishes pending rows in insertion order and marks them sent. The event (and its id) is fixed when the row is
written, so a re-publish after a relay crash is the same event, which consumers drop as a duplicate: what
commits is published exactly once downstream, what rolls back is never published.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import BigInteger, Connection, DateTime, Index, Integer, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from events.envelope import CloudEvent
from events.sql_ops import bulk_insert
from foundation.db import Base


class OutboxEntry(Base):
    __tablename__ = "event_outbox"
    __table_args__ = (Index("ix_event_outbox_pending", "sent_at", "id"),)

    # BIGINT on PostgreSQL, INTEGER (rowid alias, autoincrement) on SQLite.
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    event_id: Mapped[str] = mapped_column(String(64), unique=True)
    topic: Mapped[str] = mapped_column(String(200))
    key: Mapped[str] = mapped_column(String(500))
    payload: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


OUTBOX = OutboxEntry.__table__


def append(conn: Connection, topic: str, items: Sequence[tuple[str, CloudEvent]]) -> None:
    """Queue `(key, event)` pairs for `topic` in the caller's transaction (published once it commits).

    The events are validated already (a CloudEvent is validated on construction); the relay publishes the
    stored bytes unchanged, so the id a consumer dedupes on is the one written here."""
    if not items:
        return
    now = datetime.now(UTC)
    if conn.dialect.name == "sqlite":  # the text SQLAlchemy's DateTime stores on SQLite
        now = now.strftime("%Y-%m-%d %H:%M:%S.%f")  # type: ignore[assignment]
    bulk_insert(conn, OUTBOX, [(event.id, topic, key, event.to_bytes(), now) for key, event in items],
                columns=("event_id", "topic", "key", "payload", "created_at"))
