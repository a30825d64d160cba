"""Tables a projection consumer commits together with its projection rows (the exactly-once effect).

`ConsumerPosition` is the group's next offset per partition — the consumer seeks here on assignment, never to
Kafka's committed offsets. `ProcessedEvent` remembers applied events by their CloudEvents dedupe key
(`source` + `id`), so a duplicate published under a new offset (outbox relay crash, `events load`) has no
effect.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from itertools import groupby
from operator import attrgetter

from sqlalchemy import (
    BigInteger,
    Connection,
    Engine,
    Integer,
    Select,
    String,
    bindparam,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, mapped_column

from events.bus import Record, TopicPartition
from events.projections.projection import bound_values, in_bound
from foundation.db import Base


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


class Fenced(Exception):
    """Another member moved our position: drop this batch and re-seek to the database's positions."""


POSITIONS = ConsumerPosition.__table__
_PARTITION = attrgetter("topic", "partition")
_OFFSET = attrgetter("offset")
# Built once: constructing a Core statement per batch and partition cost more than executing it.
_MOVE_POSITION = (
    update(POSITIONS)
    .where(
        POSITIONS.c.group_id == bindparam("b_group"),
        POSITIONS.c.topic == bindparam("b_topic"),
        POSITIONS.c.partition == bindparam("b_partition"),
        POSITIONS.c.next_offset == bindparam("b_previous"),
    )
    .values(next_offset=bindparam("b_next"))
)


def load_positions(engine: Engine, group_id: str, tps: Iterable[TopicPartition],
                   ) -> dict[TopicPartition, int | None]:
    """The group's stored next offset of each of `tps` (None: never stored, start at the beginning)."""
    tps = list(tps)
    found: dict[TopicPartition, int | None] = dict.fromkeys(tps)
    if not tps:
        return found
    with engine.connect() as conn:
        rows = conn.execute(
            select(POSITIONS.c.topic, POSITIONS.c.partition, POSITIONS.c.next_offset).where(
                POSITIONS.c.group_id == group_id,
                POSITIONS.c.topic.in_({tp.topic for tp in tps}),
            )
        )
        for topic, partition, offset in rows:
            tp = TopicPartition(topic, partition)
            if tp in found:
                found[tp] = offset
    return found


def advance_positions(conn: Connection, group_id: str, known: dict[TopicPartition, int | None],
                      records: Sequence[Record]) -> dict[TopicPartition, int]:
    """Store the next offsets after `records` in the caller's transaction, fenced on `known` (what this
    member last read or wrote): another member that moved a position makes this raise `Fenced`."""
    advanced: dict[TopicPartition, int] = {}
    for (topic, partition), run in groupby(records, key=_PARTITION):
        tp = TopicPartition(topic, partition)
        advanced[tp] = max(advanced.get(tp, 0), max(map(_OFFSET, run)) + 1)
    for tp, next_offset in advanced.items():
        key = {"group_id": group_id, "topic": tp.topic, "partition": tp.partition}
        previous = known.get(tp)
        if previous is None:
            try:
                with conn.begin_nested():
                    conn.execute(insert(POSITIONS).values(**key, next_offset=next_offset))
            except IntegrityError as exc:
                raise Fenced() from exc
            continue
        result = conn.execute(_MOVE_POSITION, {"b_group": group_id, "b_topic": tp.topic,
                                               "b_partition": tp.partition, "b_previous": previous,
                                               "b_next": next_offset})
        if result.rowcount != 1:
            raise Fenced()
    return advanced
