"""`open_bus(settings, engine)`: the configured backend (ROUNDS_BUS=sql|kafka), optionally ensuring topics."""

from __future__ import annotations

from sqlalchemy import Engine

from events.bus import Bus
from events.topics import topic_specs
from rounds.settings import Settings


def open_bus(settings: Settings, engine: Engine | None, *, ensure_topics: bool = False) -> Bus:
    """SqlLog on `engine` (the process's engine, made by the composition root), or KafkaBus on
    ROUNDS_KAFKA_BOOTSTRAP (no engine needed).

    With `ensure_topics`, the Rounds topics are created (ROUNDS_KAFKA_PARTITIONS partitions each) if missing.
    The SQL backend needs its tables: the root migrates before it hands the engine out.
    """
    if settings.bus == "kafka":
        if not settings.kafka_bootstrap:
            raise ValueError("ROUNDS_BUS=kafka needs ROUNDS_KAFKA_BOOTSTRAP (host:port of the brokers)")
        from events.kafka_bus import KafkaBus

        bus: Bus = KafkaBus(settings.kafka_bootstrap)
    else:
        from events.sql_log import SqlLog

        if engine is None:
            raise ValueError("ROUNDS_BUS=sql needs the process's engine on ROUNDS_DATABASE_URL")
        bus = SqlLog(engine)
    if ensure_topics:
        bus.ensure_topics(topic_specs(settings.kafka_partitions))
    return bus
