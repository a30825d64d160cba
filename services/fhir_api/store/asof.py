"""The as-of rule, written once: which version of which resource a context sees, on every read path.

Session SHARED_RECORD ('') is the shared record. A session sees its own rows (writes and tombstones) over the
shared record:
a shared row is hidden when the session has a row of the same type/id, and, when the session has a clock
(`now`), when the clock does not show it yet. Tombstones hide.

What the clock shows is data (`CLOCK` below, over times the known-time rule writes: store/known_time.py
computes `fhir_resource.clinical_time` per type from known_time.json, the types without one included;
store/timing.py inherits and dates the rest in SQL): a shared resource from its clinical time on, an index
row of a shared resource from `since` until `until` (store/indexing.py writes the spans of its as-of views).
ONE compiler turns each clause into SQL (`sql_clock`) and into the Python predicate (`python_clock`) that
the reads by key apply to the rows their one prebuilt statement returns.

Entry points: `visible` (search, includes, chains, `_has`, `$everything`), `visible_row` (read, vread, the
async reads, and store/rows.py `hidden_keys`: the as-of views' reference check), `version_scope` (history,
vread), `row_clock` (the index rows a clocked search reads); `context_values` / `context_shape` bind a
context to a cached statement.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
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

# The clock, as data: per kind of row, clauses (column, comparison with `now`) that must all hold; an unset
# column (NULL / None) always holds (no clinical time: the untimed types; an unbounded span).
CLOCK: dict[str, tuple[tuple[str, str], ...]] = {
    "resource": (("clinical_time", "<="),),  # fhir_resource: known once its clinical time is reached
    "index_row": (("since", "<="), ("until", ">")),  # fhir_idx_*: the span of the view it was extracted from
}
# Types a session sees only its own of: the shared record's Subscriptions are the operator's (their
# endpoints, their headers), not a session's to read, search or list in its history.
OWN_BASE_ONLY: tuple[str, ...] = ("Subscription",)
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {"<=": operator.le, ">": operator.gt}


def _not_own_only(column) -> ColumnElement[bool]:
    """The row's type is none of OWN_BASE_ONLY (plain comparisons: an expanding IN would not compile into
    the statements whose plans are checked, tests/fhir_api/store/test_query_plans.py)."""
    return and_(*(column != name for name in OWN_BASE_ONLY))


def sql_clock(kind: str, table, now) -> ColumnElement[bool]:
    """The clock's clauses for `kind` as a SQL condition on `table` (an alias), `now` a bound value."""
    clauses = [or_(table.c[col].is_(None), _COMPARE[op](table.c[col], now)) for col, op in CLOCK[kind]]
    return and_(*clauses) if len(clauses) > 1 else clauses[0]


def python_clock(kind: str) -> Callable[[Any, int], bool]:
    """The same clauses as a predicate on a fetched row (attributes by column name) and `now` (µs)."""
    clauses = [(col, _COMPARE[op]) for col, op in CLOCK[kind]]

    def shows(row: Any, now: int) -> bool:
        return all((value := getattr(row, col)) is None or compare(value, now) for col, compare in clauses)

    return shows


_RESOURCE_SHOWN = python_clock("resource")

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
    return true() if ctx.now is None else sql_clock("resource", r, _now(ctx))


def visible(r, ctx: Context) -> ColumnElement[bool]:
    """Current rows of fhir_resource (alias r) the context sees: own writes over the shared record, clock
    applied to shared rows, tombstones hidden."""
    shared = and_(r.c.session == m.SHARED_RECORD, _clock(r, ctx))
    if not ctx.session_id:
        return and_(shared, not_(r.c.deleted))
    shared = and_(shared, _not_own_only(r.c.res_type))
    session = bindparam("ctx_session", ctx.session_id)
    shadowed = exists().where(
        OWN.c.session == session, OWN.c.res_type == r.c.res_type, OWN.c.res_id == r.c.res_id
    )
    # `session IN (own, SHARED_RECORD)` repeats what the OR says, so the planner reads the (type, session,
    # deleted) index by both keys for the rids another filter gives: without it SQLite scanned every row of
    # the type.
    mine_or_shared = r.c.session.in_([session, literal(m.SHARED_RECORD)])
    return and_(not_(r.c.deleted), mine_or_shared, or_(r.c.session == session, and_(shared, not_(shadowed))))


def visible_row(rows: list, ctx: Context, with_deleted: bool):
    """Of the current rows of one type/id (shared and/or the session's), the one the context sees: its own
    first, else the shared one if the clock shows it; tombstones only `with_deleted` (to answer 410)."""
    session = ctx.session_key
    row = next((x for x in rows if x.session == session), None) or next(
        (x for x in rows if x.session == m.SHARED_RECORD), None
    )
    if row is None:
        return None
    if row.session == m.SHARED_RECORD and ctx.now is not None and not _RESOURCE_SHOWN(row, to_us(ctx.now)):
        return None
    if row.session == m.SHARED_RECORD and session and row.res_type in OWN_BASE_ONLY:
        return None
    if row.deleted and not with_deleted:
        return None
    return row


def version_scope(v, r, ctx: Context) -> ColumnElement[bool]:
    """Versions (fhir_version v, joined to their own current row r) a context's history and vread list:
    its own, and the shared versions of resources the clock shows it."""
    session = ctx.session_key
    own = v.c.session == session
    if not session:
        return own
    return or_(own, and_(v.c.session == m.SHARED_RECORD, _clock(r, ctx), _not_own_only(r.c.res_type)))


def row_clock(table, ctx: Context) -> ColumnElement[bool] | None:
    """Index rows of shared resources hold from `since` to `until` (µs; None: unbounded) in clocked
    sessions (store/views.py `timed_views`); None where no clock applies."""
    return None if ctx.now is None else sql_clock("index_row", table, _now(ctx))
