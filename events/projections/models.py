"""The default consumer group's tables of the event backbone's projections (transcript, FHIR changes) on
foundation.db.Base: alembic creates them (migration 0019_projection_tables) like every other table; a replay's
suffixed copies are made by its runner."""

from __future__ import annotations

from events.projections.fhir_changes import FhirChangesProjection
from events.projections.projection import declare_default_tables
from events.projections.transcript import TranscriptProjection
from foundation.db import Base

for _projection in (TranscriptProjection, FhirChangesProjection):
    declare_default_tables(_projection().schema(), Base.metadata)
