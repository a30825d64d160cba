"""Replay: a fresh consumer group reads from the beginning into FRESH projection tables (a name suffix per
replay), optionally only one session's events (records keyed by that session id).

The live projection is untouched; compare or swap afterwards. Replays do not dead-letter again (the live group
already did); poison events are counted and skipped. Nor do they emit: what handlers emit (`tx.emit`) is
dropped unless `emit=True` (a re-scoring that should publish its new results).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from sqlalchemy import Engine

from events.bus import Bus
from events.projections.fhir_changes import FhirChangesProjection
from events.projections.projection import Projection
from events.projections.runner import ProjectionRunner, RunStats
from events.projections.transcript import TranscriptProjection

# Replayable by name (`rounds events replay NAME`); tests/foundation/test_registrations.py checks that every
# projection of events/ is here. Services replay their own (e.g. the scorer's re-score).
PROJECTIONS: dict[str, type[Projection]] = {p.name: p for p in (TranscriptProjection, FhirChangesProjection)}


@dataclass
class ReplayResult:
    suffix: str
    group_id: str
    tables: list[str]
    stats: RunStats
    seconds: float

    @property
    def events_per_s(self) -> float:
        total = self.stats.applied + self.stats.skipped + self.stats.duplicates + self.stats.dead_lettered
        return total / self.seconds if self.seconds else 0.0


def new_suffix() -> str:
    return f"r{time.strftime('%Y%m%d%H%M%S', time.gmtime())}_{uuid.uuid4().hex[:6]}"


def replay(
    bus: Bus,
    engine: Engine,
    projection: type[Projection] | str = TranscriptProjection,
    *,
    session_id: str | None = None,
    suffix: str | None = None,
    topics: tuple[str, ...] | None = None,
    batch_size: int = 2000,
    timeout_s: float | None = None,
    emit: bool = False,
) -> ReplayResult:
    """Rebuild `projection` from the beginning of its topics into tables named with `suffix`."""
    cls = PROJECTIONS[projection] if isinstance(projection, str) else projection
    suffix = suffix or new_suffix()
    instance = cls(suffix=suffix, topics=topics)
    runner = ProjectionRunner(
        bus, engine, instance, group_id=f"replay.{cls.name}.{suffix}", key=session_id,
        batch_size=batch_size, poll_timeout_s=0.2, publish_dead_letters=False, emit=emit,
    )
    started = time.perf_counter()
    with runner:
        stats = runner.run(until_caught_up=True, timeout_s=timeout_s)
    return ReplayResult(
        suffix=suffix,
        group_id=runner.group_id,
        tables=[t.name for t in instance.tables.values()],
        stats=stats,
        seconds=time.perf_counter() - started,
    )
