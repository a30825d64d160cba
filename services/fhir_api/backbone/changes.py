"""FHIR store changes as outbox events: a write and the event announcing it commit in one transaction.

The store calls `OutboxListener(conn, change)` inside its write transaction (`ChangeListener` in
services/fhir_api/store/interface.py); the listener appends the id-only `rounds.fhir.resource.<action>` event
to the outbox (events/outbox.py), which the relay publishes to `rounds.fhir-changes` keyed as the catalog
routes it: a session's changes by the session (its writes stay in order behind its Subscription's), the
shared record's by `Type/id`.
"""

from __future__ import annotations

from sqlalchemy import Connection

from events import outbox
from events.catalog import CATALOG
from events.envelope import CloudEvent
from events.payloads import FhirResourceChange
from events.topics import FHIR_CHANGES
from services.fhir_api.store.interface import ResourceChange

FHIR_SOURCE = "/rounds/fhir"


def change_event(change: ResourceChange) -> CloudEvent:
    """The id-only `rounds.fhir.resource.<action>` event for one stored version (like Azure's FHIR events)."""
    return CATALOG.make(
        FhirResourceChange.TYPES[change.action],
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
        outbox.append(conn, self.topic, [(CATALOG.route(event)[1], event)])


outbox_listener = OutboxListener()
