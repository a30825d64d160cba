"""Patient/$everything: the Patient, then its compartment (CompartmentDefinition-patient) by type, with the
session clock applied, `_since` / `_type`, and what the page refers to outside the compartment.

A page is one statement over the reference index: the compartment members are the reference rows of the
compartment parameters pointing at the Patient, each row's type known from its parameter key, so the walk
is ordered by (type number, rid) from the index alone and only the page's rows (count + 1) are looked up,
checked against the session's view and read. Pages continue by keyset cursor (search/cursor.py) and are
pinned to the first page's snapshot, so resources deleted or created between two page requests never shift,
repeat or drop another. The total is counted only when asked (`_total`), like every other search.

Every reference of the page resolves within the walk: references to compartment members come as matches of
their own page; the rest (Medication, its ingredient Medications, Location and the Locations and
Organizations it is part of, Organization, Practitioner, other patients...) come as includes of every page
that refers to them, followed from included resources too, until nothing new is found.
"""

from __future__ import annotations

from datetime import datetime
from functools import cache

from sqlalchemy import (
    BigInteger,
    Connection,
    DateTime,
    Integer,
    Select,
    and_,
    bindparam,
    case,
    func,
    literal,
    not_,
    select,
    union_all,
)

from services.fhir_api.search import cursor
from services.fhir_api.search import query as q
from services.fhir_api.search.engine import ESTIMATE_CAP, SNAPSHOT, aware, fetch, referenced_rids, rows_of
from services.fhir_api.search.keys import stored_keys
from services.fhir_api.search.registry import patient_compartment
from services.fhir_api.store import models as m
from services.fhir_api.store.interface import Context, Cursor, NotFound, SearchResult, StoredResource

WINDOW = 4  # members sorted per page: this many times the page (more only when most of them are hidden)
UNCUT = 2**31 - 1
MAX_HOPS = 8  # rounds of references followed from included resources (Location partOf chains are short)


@cache
def member_keys() -> dict[str, tuple[int, ...]]:
    """Compartment type -> the keys of its reference rows that put a resource in a Patient's compartment."""
    out: dict[str, tuple[int, ...]] = {}
    for rtype, names in sorted(patient_compartment().items()):
        keys = {key for name in names for key, _ in stored_keys(rtype, name)}
        if keys:  # Patients too: those linked to this one
            out[rtype] = tuple(sorted(keys))
    return out


@cache
def type_numbers() -> dict[str, int]:
    """The walk's order of types: the Patient itself first (0), then the compartment's types by name."""
    return {rtype: i for i, rtype in enumerate(member_keys(), start=1)}


_PAGES: dict[tuple, Select] = {}  # page statements by shape (values bound by name)


def _walk(ctx: Context, types: tuple[str, ...] | None, since: bool, at: Cursor | None) -> tuple[Select, list]:
    """The compartment walk for one request shape: (type number, rid) of the members, the Patient's own row
    first, distinct, in walk order, in the session's view; and its (sort key, descending) list for the
    cursor. The type number comes from the reference row's parameter key: no resource row is read to sort."""
    ref, r = m.reference, q.R
    wanted = [t for t in member_keys() if types is None or t in types]
    numbers = type_numbers()
    branches = []
    if types is None or "Patient" in types:
        branches.append(
            select(
                literal(0, Integer).label("type_no"),
                bindparam("everything_patient_rid", type_=BigInteger).label("rid"),
            )
        )
    keys = {key: numbers[t] for t in wanted for key in member_keys()[t]}
    if keys:
        number = case(
            {literal(k, BigInteger): literal(n, Integer) for k, n in keys.items()}, value=ref.c.param_key
        )
        branches.append(
            select(number.label("type_no"), ref.c.rid.label("rid")).where(
                ref.c.param_key.in_([literal(k, BigInteger) for k in keys]),
                ref.c.target_id == bindparam("everything_patient"),
                ref.c.target_type == "Patient",
            )
        )
    every = (union_all(*branches) if len(branches) > 1 else branches[0]).subquery("every")
    # distinct and sorted in one pass, before the join, and cut to `walk_cap` rows: the database reads
    # resource rows only for those (a hidden or deleted one is skipped; `everything` asks again, uncut, when
    # too many were). `walked`: the reference rows beyond the cursor, so a short page knows it is the last.
    walk = select(every.c.type_no, every.c.rid, func.count().over().label("walked")).distinct()
    if at is not None:  # only the members beyond the cursor are sorted
        walk = walk.where(
            cursor.beyond([(every.c.type_no, False)], every.c.rid, at.direction, cursor.nulls(at))
        )
    order = cursor.walk([(every.c.type_no, False)], every.c.rid, at)
    members = walk.order_by(*order).limit(bindparam("walk_cap", type_=Integer)).subquery("members")
    sort = [(members.c.type_no, False)]
    stmt = (
        select(members.c.type_no, members.c.rid, members.c.walked)  # in the members' order
        .join(r, r.c.rid == members.c.rid)
        .where(q.visible(r, ctx), r.c.created_seq <= bindparam("snapshot", type_=BigInteger))
    )
    if since:
        stmt = stmt.where(r.c.last_updated >= bindparam("everything_since", type_=DateTime(timezone=True)))
    return stmt, sort


def _page(ctx: Context, types: tuple[str, ...] | None, since: bool, at: Cursor | None, dialect) -> Select:
    shape = (
        q.context_shape(ctx),
        types,
        since,
        (at.direction, cursor.nulls(at)) if at else None,
        dialect.name,
    )
    found = _PAGES.get(shape)
    if found is None:
        stmt, sort = _walk(ctx, types, since, at)
        members = stmt.selected_columns
        found = stmt.order_by(*cursor.walk(sort, members.rid, at))
        found = found.limit(bindparam("page_limit", type_=Integer)).offset(
            bindparam("page_offset", type_=Integer)
        )
        found.compile(dialect=dialect)  # settle lazily built parts before threads share it
        if len(_PAGES) > 256:
            _PAGES.clear()
        _PAGES[shape] = found
    return found


def everything(
    conn: Connection,
    ctx: Context,
    patient_id: str,
    since: datetime | None,
    types: list[str] | None,
    count: int,
    offset: int,
    at: Cursor | None = None,
    total: str = "none",
    snapshot: int | None = None,
) -> SearchResult:
    r = q.R
    found = conn.execute(
        select(r.c.rid, r.c.last_updated).where(
            r.c.res_type == "Patient", r.c.res_id == patient_id, q.visible(r, ctx)
        )
    ).first()
    if found is None:
        raise NotFound(f"Patient/{patient_id} not found")
    patient = found.rid
    walked = (types is None or "Patient" in types) and (since is None or aware(found.last_updated) >= since)
    if snapshot is None:
        snapshot = rows_of(conn, SNAPSHOT, {})[0][0]
    wanted = tuple(sorted(set(types))) if types else None
    values = {
        **q.context_values(ctx),
        "everything_patient": patient_id,
        "everything_patient_rid": patient,
        "snapshot": snapshot,
        "page_limit": count + 1,
        "page_offset": offset,
    }
    if since is not None:
        values["everything_since"] = since
    result = SearchResult([], [], None, [], False, snapshot)
    if total != "none":
        walk = _walk(ctx, wanted, since is not None, None)[0]
        counted = walk.limit(ESTIMATE_CAP) if total == "estimate" else walk
        counting = {**values, "walk_cap": UNCUT}
        result.total = conn.execute(
            select(func.count()).select_from(counted.subquery()), counting
        ).scalar_one()
    if count > 0:
        page_stmt = _page(ctx, wanted, since is not None, at, conn.dialect)
        if at is not None:
            values.update(
                cursor.bind_values(at, (page_stmt.selected_columns.type_no, page_stmt.selected_columns.rid))
            )
        cap = WINDOW * (count + 1) + offset
        rows = rows_of(conn, page_stmt, {**values, "walk_cap": cap})
        if len(rows) <= count and (not rows or rows[0].walked > cap):  # most of the cut hidden in this view
            rows = rows_of(conn, page_stmt, {**values, "walk_cap": UNCUT})
        if at is not None and at.direction == "before":
            rows.reverse()  # walked backwards from the cursor
        page = cursor.window(result, rows, count, at, offset, lambda row: (row.type_no, row.rid))
        result.matches = fetch(conn, [row.rid for row in page])
    if result.matches:
        patient_at = (patient, patient_id, walked)
        result.includes = _referenced(conn, ctx, [row.rid for row in page], patient_at, wanted, since)
    return result


def _referenced(
    conn: Connection,
    ctx: Context,
    page: list[int],
    patient: tuple[int, str, bool],  # rid, id, whether the walk delivers it
    types: tuple[str, ...] | None,
    since: datetime | None,
) -> list[StoredResource]:
    """What the page's rows (rids) refer to that the walk does not deliver as matches, and what those refer
    to in turn, until nothing new is found: references resolve within the walk."""
    patient_rid, patient_id, walked = patient
    seen, frontier, out = {*page, patient_rid} if walked else set(page), page, []
    for _ in range(MAX_HOPS):
        rids = [rid for rid in dict.fromkeys(referenced_rids(conn, ctx, frontier)) if rid not in seen]
        if not rids:
            break
        seen.update(rids)
        members = _members(conn, rids, patient_id)
        if members and (types is not None or since is not None):
            members -= _left_out(conn, members, types, since)  # the walk skips them: they come along here
        frontier = [rid for rid in rids if rid not in members]
        out += frontier
    return fetch(conn, out)


def _members(conn: Connection, rids: list[int], patient_id: str) -> set[int]:
    """Which of `rids` are in the Patient's compartment."""
    ref = m.reference
    keys = [key for keys in member_keys().values() for key in keys]
    stmt = select(ref.c.rid).where(
        ref.c.rid.in_(rids),
        ref.c.param_key.in_(keys),
        ref.c.target_id == patient_id,
        ref.c.target_type == "Patient",
    )
    return set(conn.execute(stmt).scalars())


def _left_out(
    conn: Connection, rids: set[int], types: tuple[str, ...] | None, since: datetime | None
) -> set[int]:
    """Which of the member rows `rids` the walk leaves out by `_type` / `_since`."""
    r = m.resource
    kept = [r.c.res_type.in_(types)] if types is not None else []
    if since is not None:
        kept.append(r.c.last_updated >= since)
    stmt = select(r.c.rid).where(r.c.rid.in_(list(rids)), not_(and_(*kept)))
    return set(conn.execute(stmt).scalars())
