"""What a projection is: its own tables (created per name suffix, so a replay builds fresh ones) and handlers.

A projection subclass declares `name`, the `topics` it reads, the event `types` it applies, `schema()` (the
columns of each of its tables) and `handle(tx, record)`. Per batch the runner calls, in order:
- `prefetch(records)` OUTSIDE any database transaction (slow I/O: FHIR reads, an LLM judge); its result is
  `tx.prefetched`. It sees only events not applied yet and may run again for the same events (retries);
- then, inside ONE database transaction that also stores the consumer's positions and processed event ids:
  `prepare(tx, records)` (load what the batch touches in one query), `handle` per new event, `finish(tx)`
  (write aggregates). `tx.emit(event)` publishes an event if and only if that transaction commits (outbox).

Rules for handlers: keep per-batch state in `tx.state` only (a failed batch is retried event by event in fresh
transactions), validate an event before mutating anything, raise `RetryLater` (retry.py) for "not now" and any
other exception to reject an event as poison (it is dead-lettered).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, ClassVar

import orjson
from sqlalchemy import (
    ARRAY,
    ColumnElement,
    Connection,
    Engine,
    MetaData,
    Table,
    and_,
    any_,
    bindparam,
    func,
    inspect,
    select,
    update,
)
from sqlalchemy.schema import SchemaItem

from events import outbox
from events.bus import Record
from events.catalog import CATALOG
from events.envelope import CloudEvent
from events.sql_ops import _compiled, bulk_insert  # noqa: F401 - bulk_insert: this module's since the start
from foundation.db import NAMING_CONVENTION


@dataclass
class ProjectionTx:
    """The batch's transaction as handlers see it: connection, tables, batch state, buffered inserts."""

    conn: Connection
    tables: Mapping[str, Table]
    state: dict[str, Any] = field(default_factory=dict)
    prefetched: Any = None  # what the projection's `prefetch` returned for this batch
    emitting: bool = True  # False in replays: what handlers emit is dropped (the live group published it)
    _pending: dict[tuple[str, tuple[str, ...]], list[dict[str, Any]]] = field(default_factory=dict)
    _emitted: dict[str, list[tuple[str, CloudEvent]]] = field(default_factory=dict)

    def emit(self, event: CloudEvent, *, topic: str | None = None, key: str | None = None) -> None:
        """Publish `event` if and only if this batch commits: it is written to the outbox (events/outbox.py)
        in the batch's transaction and relayed after the commit, by the runner or any relay. A crash after
        the commit publishes it later; a rollback (poison, `RetryLater`, a crash before) never publishes it.
        Topic and key default to the catalog's route for the event's type."""
        if topic is None or key is None:
            routed_topic, routed_key = CATALOG.route(event)
            topic, key = topic or routed_topic, key or routed_key
        self._emitted.setdefault(topic, []).append((key, event))

    @property
    def emitted(self) -> int:
        """Events emitted in this batch so far."""
        return sum(map(len, self._emitted.values()))

    def emitted_events(self) -> list[CloudEvent]:
        """The events this batch wrote to the outbox (none when not emitting)."""
        return [event for items in self._emitted.values() for _, event in items] if self.emitting else []

    def insert(self, table: str, row: dict[str, Any]) -> None:
        """Queue a row (column -> value); queued rows are written at `flush` (end of batch), one executemany
        per table and set of columns. A column left out of `row` gets its default (NULL in projection
        tables): leave out the columns a kind of row never fills — sqlite3 adapts every None parameter
        through its adapter registry, which costs more than the row's insert into the index."""
        self._pending.setdefault((table, tuple(row)), []).append(row)

    def flush(self) -> None:
        for (name, _), rows in self._pending.items():
            bulk_insert(self.conn, self.tables[name], rows)
        self._pending.clear()
        for topic, items in self._emitted.items() if self.emitting else ():
            outbox.append(self.conn, topic, items)


def in_bound(column: ColumnElement, dialect: str, name: str) -> ColumnElement[bool]:
    """`column IN (<the values of parameter name>)` with the values bound as ONE parameter (`bound_values`).

    An IN list of a batch's thousands of values is expanded by SQLAlchemy value by value at every execution
    (~3 us per value on SQLite: more than the index probes). SQLite reads them from one JSON array
    (`json_each`), PostgreSQL from one array (`= ANY`); other databases get the expanding IN list."""
    if dialect == "sqlite":
        values = select(func.json_each(bindparam(name)).table_valued("value").c.value)
        return column.in_(values.scalar_subquery())
    if dialect == "postgresql":
        return column == any_(bindparam(name, type_=ARRAY(column.type)))
    return column.in_(bindparam(name, expanding=True))


def bound_values(dialect: str, values: Collection[Any]) -> Any:
    """The parameter value `in_bound` expects on `dialect` for these values (str or int)."""
    return orjson.dumps(list(values)).decode() if dialect == "sqlite" else list(values)


def bulk_update(conn: Connection, table: Table, rows: Sequence[dict[str, Any]], key: Sequence[str]) -> None:
    """UPDATE many rows (dicts of the same columns) matched on the `key` columns, through the driver's
    executemany with a statement compiled once (what `bulk_insert` does for inserts)."""
    values = [name for name in rows[0] if name not in key] if rows else []
    if not values:
        return
    compiled = _compiled(
        conn,
        ("update", table, tuple(key), tuple(values)),
        lambda: update(table)
        .where(and_(*(table.c[name] == bindparam(f"k_{name}") for name in key)))
        .values({name: bindparam(f"v_{name}") for name in values}),
    )
    binds = [f"k_{name}" for name in key] + [f"v_{name}" for name in values]
    if compiled.positional:
        binds = list(compiled.positiontup)
    pick = itemgetter(*(bind[2:] for bind in binds))  # bind "k_x"/"v_x" -> column "x"
    if compiled.positional:
        conn.exec_driver_sql(compiled.string, [pick(row) for row in rows])
    else:
        conn.exec_driver_sql(compiled.string, [dict(zip(binds, pick(row), strict=True)) for row in rows])


def table_name(base: str, suffix: str = "") -> str:
    """A projection table's name in a consumer group: `proj_<base>` for the default group (the tables alembic
    creates), `proj_<base>_<suffix>` for a replay's fresh group (the tables the runner creates)."""
    return f"proj_{base}_{suffix}" if suffix else f"proj_{base}"


def declare_default_tables(schema: dict[str, list[SchemaItem]], metadata: MetaData) -> None:
    """Declare a projection's tables as its default group names them on `metadata` (foundation.db.Base): they
    are the schema's like any model's, created by migration 0019_projection_tables and compared with it by
    tests/foundation/test_postgres_and_migrations.py."""
    for base, items in schema.items():
        Table(table_name(base), metadata, *items)


class Projection:
    name: ClassVar[str]
    topics: ClassVar[tuple[str, ...]] = ("rounds.sessions",)
    types: ClassVar[frozenset[str]] = frozenset()
    # True: the default group's tables are on foundation.db.Base (declare_default_tables) and made by a
    # migration; False (a projection of a test or an extension without one): the runner makes them
    migrated: ClassVar[bool] = False

    def __init__(self, suffix: str = "", topics: tuple[str, ...] | None = None) -> None:
        if suffix and not suffix.replace("_", "").isalnum():
            raise ValueError(f"projection suffix must be alphanumeric/underscore, got {suffix!r}")
        self.suffix = suffix
        if topics is not None:  # another namespace of topics (tests, side-by-side environments)
            self.topics = tuple(topics)
        self.metadata = MetaData(naming_convention=NAMING_CONVENTION)
        self.tables: dict[str, Table] = {
            base: Table(self.table_name(base), self.metadata, *items) for base, items in self.schema().items()
        }

    def table_name(self, base: str) -> str:
        return table_name(base, self.suffix)

    def schema(self) -> dict[str, list[SchemaItem]]:
        """Fresh Column/Constraint objects per table base name (called once per instance)."""
        raise NotImplementedError

    def create_tables(self, engine: Engine) -> None:
        """A replay's fresh tables (suffixed), or those of a projection without a migration. A migrated
        projection's default tables are the schema's (alembic): missing, they mean the database was not
        upgraded, which is said rather than patched over here. One process makes a group's tables: a group
        whose members run in several processes has them made by the process that started it, before any
        other can join (ProjectionRunner `make_tables`)."""
        if self.suffix or not self.migrated:
            self.metadata.create_all(engine, checkfirst=True)
            return
        missing = sorted(set(self.metadata.tables) - set(inspect(engine).get_table_names()))
        if missing:
            raise RuntimeError(f"projection {self.name}: tables {', '.join(missing)} are missing; run "
                               "`rounds db upgrade` (alembic creates the default group's tables)")

    def drop_tables(self, engine: Engine) -> None:
        self.metadata.drop_all(engine, checkfirst=True)

    def prefetch(self, records: Sequence[Record]) -> Any:
        """Optional: slow I/O for the batch, outside the database transaction; the result is `tx.prefetched`.
        Raise `RetryLater` when a dependency is unavailable. Runs again when the batch is retried."""
        return None

    def prepare(self, tx: ProjectionTx, records: Sequence[Record]) -> None:  # noqa: B027 - optional hook
        """Optional: load the rows this batch touches."""

    def handle(self, tx: ProjectionTx, record: Record) -> None:
        raise NotImplementedError

    def finish(self, tx: ProjectionTx) -> None:  # noqa: B027 - optional hook
        """Optional: write what `handle` aggregated in tx.state."""
