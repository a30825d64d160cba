"""The scorer's tables as its default consumer group names them, on foundation.db.Base: the score tables every
group shares and the default group's event buffers. Alembic creates them (migration 0019_projection_tables);
a re-score's fresh group makes its own suffixed buffers (ScorerProjection.create_tables)."""

from __future__ import annotations

from events.projections.projection import declare_default_tables
from foundation.db import Base
from services.consumers.scoring.tables import schema

declare_default_tables(schema(), Base.metadata)
