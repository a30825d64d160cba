"""`open_bus(settings)`: the configured backend (ROUNDS_BUS=sql|kafka), optionally ensuring the topics."""

from __future__ import annotations

from events.bus import Bus
from events.topics import topic_specs
from rounds.settings import Settings, get_settings


def open_bus(settings: Settings | None = None, *, ensure_topics: bool = False) -> Bus:
    """SqlLog on ROUNDS_DATABASE_URL, or KafkaBus on ROUNDS_KAFKA_BOOTSTRAP.

    With `ensure_topics`, the Rounds topics are created (ROUNDS_KAFKA_PARTITIONS partitions each) if missing.
    The SQL backend needs its tables: run `rounds db upgrade` first.
    """
    settings = settings or get_settings()
    if settings.bus == "kafka":
        if not settings.kafka_bootstrap:
            raise ValueError("ROUNDS_BUS=kafka needs ROUNDS_KAFKA_BOOTSTRAP (host:port of the brokers)")
        from events.kafka_bus import KafkaBus

        bus: Bus = KafkaBus(settings.kafka_bootstrap)
    else:
        from events.sql_log import SqlLog

        bus = SqlLog(settings.database_url)
    if ensure_topics:
        bus.ensure_topics(topic_specs(settings.kafka_partitions))
    return bus
