"""The FHIR changes projection: one row per announced resource version, from `rounds.fhir-changes`.

Its primary key (session, type, id, version) would reject a version applied twice, so the outbox's
crash duplicates (same event id) must be — and are — dropped by the runner's dedupe.
"""

from __future__ import annotations

from sqlalchemy import Column, PrimaryKeyConstraint, String
from sqlalchemy.schema import SchemaItem

from events.bus import Record
from events.payloads.outcome import SHARED_RECORD, FhirResourceChange
from events.projections.projection import Projection, ProjectionTx
from events.topics import FHIR_CHANGES

ACTIONS = ("created", "updated", "deleted")


class FhirChangesProjection(Projection):
    name = "fhir_changes"
    topics = (FHIR_CHANGES,)
    types = frozenset(FhirResourceChange.TYPES[action] for action in ACTIONS)
    migrated = True  # 0019_projection_tables

    def schema(self) -> dict[str, list[SchemaItem]]:
        return {
            "fhir_changes": [
                Column("session_id", String(200), nullable=False),  # SHARED_RECORD: the shared record's
                Column("resource_type", String(64), nullable=False),
                Column("resource_id", String(64), nullable=False),
                Column("version_id", String(64), nullable=False),
                Column("action", String(16), nullable=False),
                Column("event_id", String(200), nullable=False),
                Column("event_time", String(40)),
                PrimaryKeyConstraint("session_id", "resource_type", "resource_id", "version_id"),
            ]
        }

    def handle(self, tx: ProjectionTx, record: Record) -> None:
        event = record.event
        data = event.data
        tx.insert("fhir_changes", {
            "session_id": event.subject or SHARED_RECORD,
            "resource_type": data["resourceType"],
            "resource_id": data["id"],
            "version_id": data["versionId"],
            "action": event.type.rsplit(".", 1)[1],
            "event_id": event.id,
            "event_time": event.time,
        })
