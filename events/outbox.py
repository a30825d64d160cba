"""Transactional outbox: a FHIR write and the event announcing it commit in one database transaction.

The store calls `outbox_listener(conn, change)` inside its write transaction (`ChangeListener` in
services/fhir_api/store/interface.py); it appends an `OutboxEntry` holding the serialised
`rounds.fhir.resource.<action>` CloudEvent. `events/relay.py` publishes pending rows and marks them sent; the
event (and its id) is fixed when the row is written, so a re-publish after a relay crash is the same event,
which consumers drop as a duplicate.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import BigInteger, Connection, DateTime, Index, Integer, LargeBinary, String, insert
from sqlalchemy.orm import Mapped, mapped_column

from events.catalog import CATALOG
from events.envelope import CloudEvent
from events.payloads import FhirResourceChange
from events.topics import FHIR_CHANGES
from rounds.db import Base
from services.fhir_api.store.interface import ResourceChange

FHIR_SOURCE = "/rounds/fhir"


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


def change_event(change: ResourceChange) -> CloudEvent:
    """The id-only `rounds.fhir.resource.<action>` event for one stored version (like Azure's FHIR events)."""
    return CATALOG.make(
        f"rounds.fhir.resource.{change.action}",
        FhirResourceChange(
            resource_type=change.resource_type, id=change.id, version_id=str(change.version_id)
        ),
        source=FHIR_SOURCE,
        subject=change.session_id,
    )


class OutboxListener:
    """ChangeListener: record the change's event in the caller's (the store's) transaction."""

    def __init__(self, topic: str = FHIR_CHANGES) -> None:
        self.topic = topic

    def __call__(self, conn: Connection, change: ResourceChange) -> None:
        event = change_event(change)
        conn.execute(
            insert(OutboxEntry.__table__).values(
                event_id=event.id,
                topic=self.topic,
                key=f"{change.resource_type}/{change.id}",
                payload=event.to_bytes(),
                created_at=datetime.now(UTC),
            )
        )


outbox_listener = OutboxListener()
