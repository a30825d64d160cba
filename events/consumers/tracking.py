"""Tables a projection consumer commits together with its projection rows (the exactly-once effect).

`ConsumerPosition` is the group's next offset per partition — the consumer seeks here on assignment, never to
Kafka's committed offsets. `ProcessedEvent` remembers applied events by their CloudEvents dedupe key
(`source` + `id`), so a duplicate published under a new offset (outbox relay crash, `events load`) has no
effect.
"""

from __future__ import annotations

from collections.abc import Collection

import orjson
from sqlalchemy import ARRAY, BigInteger, Connection, Integer, Select, String, any_, bindparam, func, select
from sqlalchemy.orm import Mapped, mapped_column

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
    """`(source, event_id)` of the group's rows whose event id is in the `ids` parameter, as one bound value.

    An IN list of a batch's thousands of ids is expanded by SQLAlchemy value by value at every execution
    (~3 us per id on SQLite: more than the index probes). SQLite reads the ids from one JSON array
    (`json_each`), PostgreSQL from one array (`= ANY`); other databases get the IN list."""
    table = ProcessedEvent.__table__
    if dialect == "sqlite":
        ids = select(func.json_each(bindparam("ids")).table_valued("value").c.value)
        match = table.c.event_id.in_(ids.scalar_subquery())
    elif dialect == "postgresql":
        match = table.c.event_id == any_(bindparam("ids", type_=ARRAY(String)))
    else:
        match = table.c.event_id.in_(bindparam("ids", expanding=True))
    return select(table.c.source, table.c.event_id).where(table.c.group_id == bindparam("group_id"), match)


_STATEMENTS: dict[str, Select] = {}


def processed_ids(conn: Connection, group_id: str, event_ids: Collection[str]) -> set[tuple[str, str]]:
    """The `(source, event_id)` pairs among `event_ids` that the group already applied."""
    if not event_ids:
        return set()
    dialect = conn.dialect.name
    statement = _STATEMENTS.get(dialect)
    if statement is None:
        statement = _STATEMENTS[dialect] = _already_processed(dialect)
    ids = orjson.dumps(list(event_ids)).decode() if dialect == "sqlite" else list(event_ids)
    rows = conn.execute(statement, {"group_id": group_id, "ids": ids})
    return {(source, event_id) for source, event_id in rows}
