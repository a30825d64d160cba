"""Tables a projection consumer commits together with its projection rows (the exactly-once effect).

`ConsumerPosition` is the group's next offset per partition — the consumer seeks here on assignment, never to
Kafka's committed offsets. `ProcessedEvent` remembers applied events by their CloudEvents dedupe key
(`source` + `id`), so a duplicate published under a new offset (outbox relay crash, `events load`) has no
effect.
"""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import BigInteger, Connection, Integer, Select, String, bindparam, select
from sqlalchemy.orm import Mapped, mapped_column

from events.projections.projection import bound_values, in_bound
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


def _already_processed(dialect: str) -> Select:
    """`(source, event_id)` of the group's rows whose event id is in the `ids` parameter (one value)."""
    table = ProcessedEvent.__table__
    return select(table.c.source, table.c.event_id).where(
        table.c.group_id == bindparam("group_id"), in_bound(table.c.event_id, dialect, "ids")
    )


_STATEMENTS: dict[str, Select] = {}


def processed_ids(conn: Connection, group_id: str, event_ids: Collection[str]) -> set[tuple[str, str]]:
    """The `(source, event_id)` pairs among `event_ids` that the group already applied."""
    if not event_ids:
        return set()
    dialect = conn.dialect.name
    statement = _STATEMENTS.get(dialect)
    if statement is None:
        statement = _STATEMENTS[dialect] = _already_processed(dialect)
    rows = conn.execute(statement, {"group_id": group_id, "ids": bound_values(dialect, event_ids)})
    return {(source, event_id) for source, event_id in rows}
