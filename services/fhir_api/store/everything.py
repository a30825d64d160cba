"""Patient/$everything: the Patient, then its compartment (CompartmentDefinition-patient) by type, with the
session clock applied, `_since` / `_type`, and what the page refers to outside the compartment.

A page is one statement over the reference index: the compartment members are the reference rows of the
compartment parameters pointing at the Patient, each row's type known from its parameter key, so the walk
is ordered by (type number, rid) from the index alone and only the page's rows (count + 1) are looked up,
checked against the session's view and read. Pages continue by keyset cursor (store/cursor.py) and are
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

import sqlalchemy as sa
from sqlalchemy import and_, bindparam, false, func, literal, not_, select, union_all

from services.fhir_api.search.keys import stored_keys
from services.fhir_api.search.registry import patient_compartment
from services.fhir_api.store import cursor
from services.fhir_api.store import models as m
from services.fhir_api.store import query as q
from services.fhir_api.store.connections import rows_of
from services.fhir_api.store.engine import ESTIMATE_CAP, SNAPSHOT, fetch, referenced_rids
from services.fhir_api.store.interface import (
    Context,
    Cursor,
    InvalidSearch,
    NotFound,
    SearchResult,
    StoredResource,
)
from services.fhir_api.store.rows import aware

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


_PAGES: dict[tuple, sa.Select] = {}  # page statements by shape (values bound by name)


Position = tuple[str, int] | None  # a cursor's direction and type number (part of a statement's shape)


def _covers(n: int, at: Position) -> str | None:
    """How much of type number n a walk from `at` covers: "all", "beyond" (the rids past the cursor's) or
    None (none of it)."""
    if at is None:
        return "all"
    direction, at_type = at
    if n == at_type:
        return "beyond"
    return "all" if (n > at_type) == (direction == "after") else None


def _walk(ctx: Context, types: tuple[str, ...] | None, since: bool, at: Position) -> sa.Select:
    """The compartment walk for one request shape: (type number, rid) of the members from the cursor on, the
    Patient's own row first, distinct, in walk order, joined to the session's view. One branch per type, each
    reading its reference rows by the index (type number a constant, the cursor's type past the cursor's
    rid): no resource row is read to sort, and a later page sorts only what is left."""
    ref, r = m.reference, q.R
    after = at is None or at[0] == "after"
    past = bindparam("cursor_rid", type_=sa.BigInteger)
    branches = []
    if (types is None or "Patient" in types) and _covers(0, at) == "all":
        patient = bindparam("everything_patient_rid", type_=sa.BigInteger)
        branches.append(select(literal(0, sa.Integer).label("type_no"), patient.label("rid")))
    for rtype, n in type_numbers().items():
        covered = _covers(n, at)
        if (types is not None and rtype not in types) or covered is None:
            continue
        keys = member_keys()[rtype]
        # bound once: no expanding IN
        of_type = ref.c.param_key.in_([literal(k, sa.BigInteger) for k in keys])
        branch = select(literal(n, sa.Integer).label("type_no"), ref.c.rid.label("rid")).where(
            of_type, ref.c.target_id == bindparam("everything_patient"), ref.c.target_type == "Patient"
        )
        if covered == "beyond":
            branch = branch.where(ref.c.rid > past if after else ref.c.rid < past)
        branches.append(branch)
    if not branches:  # the cursor is at the walk's end
        branches.append(
            select(literal(0, sa.Integer).label("type_no"), literal(0, sa.BigInteger).label("rid"))
            .where(false())
        )
    every = (union_all(*branches) if len(branches) > 1 else branches[0]).subquery("every")
    # sorted before the join and cut to `walk_cap` rows (a top-N sort, not a sort of the whole compartment),
    # then made distinct (a resource may refer to the patient twice): the database reads resource rows only
    # for those; `everything` asks again, uncut, when too many of them are hidden or repeated
    order = [every.c.type_no, every.c.rid] if after else [every.c.type_no.desc(), every.c.rid.desc()]
    cut = select(every.c.type_no, every.c.rid).order_by(*order).limit(bindparam("walk_cap", type_=sa.Integer))
    members = select(cut.subquery("cut")).distinct().subquery("members")
    stmt = (
        select(members.c.type_no, members.c.rid)
        .join(r, r.c.rid == members.c.rid)
        .where(q.visible(r, ctx), r.c.created_seq <= bindparam("snapshot", type_=sa.BigInteger))
    )
    if since:
        stmt = stmt.where(r.c.last_updated >= bindparam("everything_since", type_=sa.DateTime(timezone=True)))
    return stmt


def _page(ctx: Context, types: tuple[str, ...] | None, since: bool, at: Position, dialect) -> sa.Select:
    shape = (q.context_shape(ctx), types, since, at, dialect.name)
    found = _PAGES.get(shape)
    if found is None:
        stmt = _walk(ctx, types, since, at)
        walked = stmt.selected_columns
        after = at is None or at[0] == "after"
        order = [walked.type_no, walked.rid] if after else [walked.type_no.desc(), walked.rid.desc()]
        found = stmt.order_by(*order).limit(bindparam("page_limit", type_=sa.Integer))
        found = found.offset(bindparam("page_offset", type_=sa.BigInteger))  # _offset runs to 2**62
        found.compile(dialect=dialect)  # settle lazily built parts before threads share it
        if len(_PAGES) > 256:
            _PAGES.clear()
        _PAGES[shape] = found
    return found


def _position(at: Cursor | None) -> tuple[Position, dict]:
    """The statement position of a cursor and its bound rid (a cursor of this walk holds two integers)."""
    if at is None:
        return None, {}
    checked = cursor.bind_values(at, (literal(0, sa.Integer), m.reference.c.rid))
    if "cursor_0" not in checked or "cursor_rid" not in checked:
        raise InvalidSearch(f"_{at.direction}: the cursor does not fit this walk")
    return (at.direction, checked["cursor_0"]), {"cursor_rid": checked["cursor_rid"]}


def everything(
    conn: sa.Connection,
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
        walk = _walk(ctx, wanted, since is not None, None)
        counted = walk.limit(ESTIMATE_CAP) if total == "estimate" else walk
        counting = {**values, "walk_cap": UNCUT}
        result.total = conn.execute(
            select(func.count()).select_from(counted.subquery()), counting
        ).scalar_one()
    if count > 0:
        position, bound = _position(at)
        page_stmt = _page(ctx, wanted, since is not None, position, conn.dialect)
        values.update(bound)
        cap = min(WINDOW * (count + 1) + offset, UNCUT)  # a far _offset: no cut (the bind is int4)
        rows = rows_of(conn, page_stmt, {**values, "walk_cap": cap})
        if len(rows) <= count:  # the walk's end (cheap to ask again), or too much of the cut hidden
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
    conn: sa.Connection,
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


def _members(conn: sa.Connection, rids: list[int], patient_id: str) -> set[int]:
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
    conn: sa.Connection, rids: set[int], types: tuple[str, ...] | None, since: datetime | None
) -> set[int]:
    """Which of the member rows `rids` the walk leaves out by `_type` / `_since`."""
    r = m.resource
    kept = [r.c.res_type.in_(types)] if types is not None else []
    if since is not None:
        kept.append(r.c.last_updated >= since)
    stmt = select(r.c.rid).where(r.c.rid.in_(list(rids)), not_(and_(*kept)))
    return set(conn.execute(stmt).scalars())
