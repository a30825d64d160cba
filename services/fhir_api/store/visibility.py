"""The one rule of what a context sees: which version of which resource, on every path.

Session '' is the shared record. A session sees its own rows (writes and tombstones) over the shared record:
a shared row is hidden when the session has a row of the same type/id, and, when the session has a clock
(`now`), when its clinical time (or the time it inherits: store/timing.py) is after `now`. Tombstones hide.
Read (`visible_row`), search, includes, chains, `_has` and `$everything` (`visible`), history and vread
(`version_scope`), the as-of views' reference check (`hidden_keys`) and the index rows a clocked search
reads (`row_clock`) all say it through this module.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    and_,
    bindparam,
    exists,
    literal,
    not_,
    or_,
    true,
)

from services.fhir_api.search.values import to_us
from services.fhir_api.store import models as m
from services.fhir_api.store.interface import Context

OWN = m.resource.alias("own")
OWN.c  # noqa: B018 - build the proxies at import, not racing in the server's worker threads


def context_values(ctx: Context) -> dict[str, Any]:
    """The values the conditions below bind for a context (by name: a cached statement runs for any
    context of its shape)."""
    values: dict[str, Any] = {}
    if ctx.session_id:
        values["ctx_session"] = ctx.session_id
    if ctx.now is not None:
        values["ctx_now"] = to_us(ctx.now)
    return values


def context_shape(ctx: Context) -> tuple[bool, bool]:
    """What of a context changes the SQL of the conditions below (the rest is bound)."""
    return bool(ctx.session_id), ctx.now is not None


def _now(ctx: Context):
    return bindparam("ctx_now", to_us(ctx.now), type_=BigInteger)


def _clock(r, ctx: Context) -> ColumnElement[bool]:
    if ctx.now is None:
        return true()
    return or_(r.c.clinical_time.is_(None), r.c.clinical_time <= _now(ctx))


def visible(r, ctx: Context) -> ColumnElement[bool]:
    """Current rows of fhir_resource (alias r) the context sees: own writes over the shared record, clock
    applied to shared rows, tombstones hidden."""
    shared = and_(r.c.session == "", _clock(r, ctx))
    if not ctx.session_id:
        return and_(shared, not_(r.c.deleted))
    session = bindparam("ctx_session", ctx.session_id)
    shadowed = exists().where(
        OWN.c.session == session, OWN.c.res_type == r.c.res_type, OWN.c.res_id == r.c.res_id
    )
    # `session IN (own, '')` repeats what the OR says, so the planner reads the (type, session, deleted) index
    # by both keys for the rids another filter gives: without it SQLite scanned every row of the type.
    mine_or_shared = r.c.session.in_([session, literal("")])
    return and_(not_(r.c.deleted), mine_or_shared, or_(r.c.session == session, and_(shared, not_(shadowed))))


def visible_row(rows: list, ctx: Context, with_deleted: bool):
    """Of the current rows of one type/id (shared and/or the session's), the one the context sees: its own
    first, else the shared one if the clock shows it; tombstones only `with_deleted` (to answer 410)."""
    session = ctx.session_id or ""
    row = next((x for x in rows if x.session == session), None) or next(
        (x for x in rows if x.session == ""), None
    )
    if row is None:
        return None
    late = row.session == "" and ctx.now is not None and row.clinical_time is not None
    if late and row.clinical_time > to_us(ctx.now):
        return None
    if row.deleted and not with_deleted:
        return None
    return row


def version_scope(v, r, ctx: Context) -> ColumnElement[bool]:
    """Versions (fhir_version v, joined to their own current row r) a context's history and vread list:
    its own, and the shared versions of resources the clock shows it."""
    session = ctx.session_id or ""
    own = v.c.session == session
    if not session:
        return own
    return or_(own, and_(v.c.session == "", _clock(r, ctx)))


_SEEN_PG = (
    "SELECT r.session, r.res_type, r.res_id, r.clinical_time, r.deleted"
    " FROM unnest(%s::text[], %s::text[]) AS k(t, i)"
    " JOIN fhir_resource r ON r.session IN ('', %s) AND r.res_type = k.t AND r.res_id = k.i"
)


_SQLITE_CHUNK = 400  # ids per probe
_SQLITE_VARIABLES = 900  # bound values per statement (under SQLite's oldest limit, 999)
_SEEN_SQLITE = (
    "SELECT session, res_type, res_id, clinical_time, deleted FROM fhir_resource"
    " WHERE session IN (?, ?) AND res_type = ? AND res_id IN ("
)


def hidden_keys(conn: Connection, ctx: Context, keys: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """Of referenced (type, id) keys, those stored but not visible to the context (clock or tombstone): one
    statement (on PostgreSQL, probes of the resource key by arrays of keys)."""
    session = ctx.session_id or ""
    if conn.dialect.name == "postgresql":
        types, ids = [k[0] for k in keys], [k[1] for k in keys]
        rows = conn.exec_driver_sql(_SEEN_PG, (types, ids, session)).all()
    else:
        # One probe of the full resource key per type and chunk of ids, in one statement sent straight to
        # the driver: with every type in one OR, SQLite's planner read every row of the shared record once the
        # id lists grew; built through SQLAlchemy, a handful of keys cost more to compile than to look up.
        by_type: dict[str, list[str]] = {}
        for rtype, rid in sorted(keys):
            by_type.setdefault(rtype, []).append(rid)
        probes = [
            (_SEEN_SQLITE + ",".join("?" * len(chunk)) + ")", (session, "", rtype, *chunk))
            for rtype, ids in by_type.items()
            for chunk in (ids[at : at + _SQLITE_CHUNK] for at in range(0, len(ids), _SQLITE_CHUNK))
        ]
        rows: list = []
        while probes:
            batch, size = [], 0
            while probes and (not batch or size + len(probes[0][1]) <= _SQLITE_VARIABLES):
                batch.append(probes.pop(0))
                size += len(batch[-1][1])
            sql = " UNION ALL ".join(text for text, _ in batch)
            rows += conn.exec_driver_sql(sql, tuple(v for _, values in batch for v in values)).all()
    found: dict[tuple[str, str], list] = {}
    for row in rows:
        found.setdefault((row.res_type, row.res_id), []).append(row)
    return {key for key, rows in found.items() if visible_row(rows, ctx, False) is None}


def row_clock(table, ctx: Context) -> ColumnElement[bool] | None:
    """Index rows of shared resources hold from `since` to `until` (µs; None: unbounded) in clocked
    sessions (store/views.py `timed_views`); None where no clock applies."""
    if ctx.now is None:
        return None
    now = _now(ctx)
    return and_(
        or_(table.c.since.is_(None), table.c.since <= now), or_(table.c.until.is_(None), table.c.until > now)
    )
