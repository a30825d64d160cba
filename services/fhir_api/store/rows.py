"""Row-level helpers of SqlResourceStore: the prebuilt current-row statements (which of their rows a context
sees: store/asof.py `visible_row`), the referenced keys a clocked context cannot see (`hidden_keys`),
stored-row conversion and the millisecond clock stamped into meta.lastUpdated."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    ColumnElement,
    Connection,
    FromClause,
    Select,
    Text,
    and_,
    bindparam,
    cast,
    func,
    literal,
    select,
)
from sqlalchemy.dialects.postgresql import ARRAY

from services.fhir_api.store import models as m
from services.fhir_api.store.asof import visible_row
from services.fhir_api.store.connections import rows_of
from services.fhir_api.store.interface import Context, Gone, NotFound, StoredResource
from services.fhir_api.store.known_time import clinical_time


def aware(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; every stored time is UTC."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def now_ms() -> datetime:
    moment = datetime.now(UTC)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def instant(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def current_statement(raw: bool, in_session: bool):
    """The row(s) of type/id a context may see (the shared one, and its own in a session), by bound values."""
    r = m.resource
    stmt = select(r)
    if raw:
        stmt = select(r, m.version.c.raw, m.version.c.method).join(m.version, m.version.c.seq == r.c.seq)
    shared = r.c.session == m.SHARED_RECORD
    scope = r.c.session.in_((bindparam("session"), m.SHARED_RECORD)) if in_session else shared
    stmt = stmt.where(r.c.res_type == bindparam("rtype"), r.c.res_id == bindparam("rid"), scope)
    stmt.compile()
    return stmt


# Built once (a read runs the same statement with its own values: building it cost more than running it) and
# compiled at import, so the server's threads never race to set up its lazily built parts.
CURRENT = {
    (raw, in_session): current_statement(raw, in_session)
    for raw in (False, True)
    for in_session in (False, True)
}


def index_clinical_time(resource: dict | None) -> int | None:
    return clinical_time(resource) if resource is not None else None


def stored_resource(row, rid: int | None = None) -> StoredResource:
    """A fetched row (with its version's raw JSON and method) as served. With `rid`: a search's current row,
    which is never a tombstone (its select leaves `deleted` out)."""
    return StoredResource(
        row.res_type,
        row.res_id,
        row.version,
        aware(row.last_updated),
        bytes(row.raw or b""),
        row.deleted if rid is None else False,
        row.method,
        row.session,
        rid,
    )


def readable(row, resource_type: str, id: str) -> StoredResource:
    if row is None:
        raise NotFound(f"{resource_type}/{id} not found")
    if row.deleted:
        raise Gone(f"{resource_type}/{id} was deleted")
    return stored_resource(row)


SESSION = select(m.session).where(m.session.c.id == bindparam("sid"))
SESSION.compile()


def session_context(row) -> Context | None:
    if row is None:
        return None
    return Context(session_id=row.id, now=aware(row.now) if row.now is not None else None,
                   ended=row.ended is not None)


_R = m.resource
_KEYS = (
    func.unnest(cast(bindparam("types"), ARRAY(Text)), cast(bindparam("ids"), ARRAY(Text)))
    .table_valued("t", "i")
    .render_derived(name="k")
)


def _candidates(key_filter: ColumnElement[bool], source: FromClause | None = None) -> Select:
    """The current rows (shared and the session's) of the keys asked: what `visible_row` chooses from."""
    stmt = select(_R.c.session, _R.c.res_type, _R.c.res_id, _R.c.clinical_time, _R.c.deleted)
    scope = _R.c.session.in_([literal(m.SHARED_RECORD), bindparam("session")])
    if source is not None:
        return stmt.select_from(source).join(_R, and_(scope, key_filter))
    return stmt.where(scope, key_filter)


# Prebuilt (a handful of keys cost more to compile than to look up; on PostgreSQL run straight on the driver).
# PostgreSQL: probes of the resource key by arrays of keys. SQLite: one probe of the full key per type and
# chunk of ids (with every type in one OR, its planner read every row of the shared record once lists grew).
SEEN_PG = _candidates(and_(_R.c.res_type == _KEYS.c.t, _R.c.res_id == _KEYS.c.i), _KEYS)
SEEN_SQLITE = _candidates(
    and_(_R.c.res_type == bindparam("rtype"), _R.c.res_id.in_(bindparam("ids", expanding=True)))
)
for _stmt in (SEEN_PG, SEEN_SQLITE):
    _stmt.compile()  # settle lazily built parts at import, not racing in the server's worker threads
_SQLITE_CHUNK = 400  # ids per probe (under SQLite's oldest limit of bound values, 999)


def hidden_keys(conn: Connection, ctx: Context, keys: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """Of referenced (type, id) keys, those stored but not visible to the context (clock or tombstone)."""
    session = ctx.session_key
    if conn.dialect.name == "postgresql":
        types, ids = [k[0] for k in keys], [k[1] for k in keys]
        rows = rows_of(conn, SEEN_PG, {"types": types, "ids": ids, "session": session})
    else:
        by_type: dict[str, list[str]] = {}
        for rtype, rid in sorted(keys):
            by_type.setdefault(rtype, []).append(rid)
        rows = [
            row
            for rtype, ids in by_type.items()
            for at in range(0, len(ids), _SQLITE_CHUNK)
            for row in conn.execute(
                SEEN_SQLITE, {"session": session, "rtype": rtype, "ids": ids[at : at + _SQLITE_CHUNK]}
            )
        ]
    found: dict[tuple[str, str], list] = {}
    for row in rows:
        found.setdefault((row.res_type, row.res_id), []).append(row)
    return {key for key, rows in found.items() if visible_row(rows, ctx, False) is None}
