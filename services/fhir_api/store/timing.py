"""Times the as-of clock needs beyond a resource's own: written with shared resources and after bulk loads.

- Inherited clinical time (known_time.json `inherit`): a resource type with no clinical time of its own (a
  Condition, a MedicationDispense without hand-over time) takes the latest clinical time of what its listed
  reference parameters point at (its Encounter, its MedicationRequest), so a diagnosis of a later admission
  is as hidden as the admission.
- Known from its first use (known_time.json `inherit_from_referrers`): a resource still without one (a
  Specimen without a collection time) takes the earliest clinical time of what refers to it (its first test).
- Dated references: a reference row to a resource with a later clinical time than its source holds only from
  that time (`since`), as the as-of view removes the Reference until its target is visible.

- Known at the encounter's end (known_time.json `profiles`, `encounter-end`): a billed diagnosis or ICD
  procedure takes the last instant of its Encounter's period (the `date` index row of the Encounter's final
  view), whatever its own elements say; an Encounter without an end: never, for a clocked session.

Each is one set-based statement over the index tables, for given rows (a write) or every shared row (a
load). A target written after the resources that refer to it does not re-date them (README: known limits).
"""

from __future__ import annotations

from functools import cache

from sqlalchemy import Connection, Update, and_, bindparam, func, or_, select, update

from services.fhir_api.search.keys import stored_keys
from services.fhir_api.search.values import MAX_US
from services.fhir_api.store import models as m
from services.fhir_api.store.known_time import (
    ENCOUNTER_END_PROFILES,
    INHERIT,
    INHERIT_FROM_REFERRERS,
    UNTIMED,
)

RIDS = bindparam("rids", expanding=True)


def settle_times(conn: Connection, rids: list[int] | None = None, types: set[str] | None = None) -> None:
    """Inherited clinical times, then dated reference rows, of the given shared rows (None: all); `types`:
    the only resource types among them, when the caller knows (a write: no statement for other types).
    Each statement is built once per process (`rids` an expanding parameter): a write runs them for one row,
    and building them again for every write cost more than running them."""
    if rids is not None and not rids:
        return
    by_rids = rids is not None
    params = {"rids": rids} if by_rids else {}
    for rtype in ("Condition", "Procedure"):
        if ENCOUNTER_END_PROFILES and (types is None or rtype in types):
            conn.execute(_encounter_end(rtype, by_rids), params)
    for rtype in INHERIT:
        if types is None or rtype in types:
            conn.execute(_inherited(rtype, by_rids), params)
    for rtype, pairs in INHERIT_FROM_REFERRERS.items():
        if types is None or not types.isdisjoint({rtype, *(src for src, _ in pairs)}):
            conn.execute(_from_referrers(rtype, by_rids), params)
    conn.execute(_dated_references(by_rids), params)


@cache
def _inherited(rtype: str, by_rids: bool) -> Update:
    """A type without a clinical time of its own takes the latest of what its listed references point at."""
    r, ref = m.resource, m.reference
    keys = [key for name in INHERIT[rtype] for key, _ in stored_keys(rtype, name)]
    p = m.resource.alias("p")
    parent = (
        select(func.max(p.c.clinical_time))
        .select_from(ref)
        .join(p, and_(p.c.res_type == ref.c.target_type, p.c.res_id == ref.c.target_id))
        .where(ref.c.rid == r.c.rid, ref.c.param_key.in_(keys), p.c.session == m.SHARED_RECORD)
        .scalar_subquery()
    )
    stmt = update(r).where(r.c.res_type == rtype, r.c.session == m.SHARED_RECORD, r.c.clinical_time.is_(None))
    if by_rids:
        stmt = stmt.where(r.c.rid.in_(RIDS))
    return stmt.values(clinical_time=parent)


@cache
def _from_referrers(rtype: str, by_rids: bool) -> Update:
    """A resource still without a clinical time takes the earliest of what refers to it."""
    r, ref = m.resource, m.reference
    keys = [key for src, name in INHERIT_FROM_REFERRERS[rtype] for key, _ in stored_keys(src, name)]
    o = m.resource.alias("o")
    first = (
        select(func.min(o.c.clinical_time))
        .select_from(ref)
        .join(o, o.c.rid == ref.c.rid)
        .where(
            ref.c.param_key.in_(keys),
            ref.c.target_type == rtype,
            ref.c.target_id == r.c.res_id,
            o.c.session == m.SHARED_RECORD,
        )
        .scalar_subquery()
    )
    stmt = update(r).where(r.c.res_type == rtype, r.c.session == m.SHARED_RECORD, r.c.clinical_time.is_(None))
    if by_rids:  # the written resource itself, or what it refers to
        targets = select(ref.c.target_id).where(ref.c.rid.in_(RIDS), ref.c.param_key.in_(keys))
        stmt = stmt.where(or_(r.c.rid.in_(RIDS), r.c.res_id.in_(targets)))
    return stmt.values(clinical_time=first)


@cache
def _dated_references(by_rids: bool) -> Update:
    """A reference to a resource known later than its source holds only from then (`since`)."""
    ref = m.reference
    t, s, u = m.resource.alias("t"), m.resource.alias("s"), m.resource.alias("u")
    target = (
        select(t.c.clinical_time)
        .where(
            t.c.session == m.SHARED_RECORD, t.c.res_type == ref.c.target_type, t.c.res_id == ref.c.target_id
        )
        .scalar_subquery()
    )
    source = select(s.c.clinical_time).where(s.c.rid == ref.c.rid).scalar_subquery()
    floor = -(2**62)
    stmt = update(ref).where(
        ref.c.target_type.is_not(None),
        ref.c.target_type.not_in(UNTIMED),
        ref.c.rid.in_(
            select(u.c.rid).where(u.c.session == m.SHARED_RECORD, *([u.c.rid.in_(RIDS)] if by_rids else []))
        ),
        target > func.coalesce(source, floor),
        target > func.coalesce(ref.c.since, floor),
    )
    return stmt.values(since=target)


@cache
def _encounter_end(rtype: str, by_rids: bool) -> Update:
    """Shared rows whose profile is known at its encounter's end get that end (µs, its last instant) as their
    clinical time; MAX_US - 1 when the Encounter is stored without an end or not at all."""
    r, ref, uri, date = m.resource, m.reference, m.uri, m.date
    e = m.resource.alias("e")
    profile_keys = [key for key, _ in stored_keys(rtype, "_profile")]
    encounter_keys = [key for key, _ in stored_keys(rtype, "encounter")]
    period_keys = [key for key, _ in stored_keys("Encounter", "date")]
    end = (
        select(func.max(date.c.high) - 1)
        .select_from(ref)
        .join(
            e,
            and_(e.c.res_type == "Encounter", e.c.res_id == ref.c.target_id, e.c.session == m.SHARED_RECORD),
        )
        .join(
            date,
            # `+ 0`: no index on the key (as query.in_param's by_rid), so SQLite reads the encounter's own
            # date rows by rid instead of every Encounter's date rows for each Condition
            and_(date.c.rid == e.c.rid, (date.c.param_key + 0).in_(period_keys), date.c.until.is_(None)),
        )
        .where(ref.c.rid == r.c.rid, ref.c.param_key.in_(encounter_keys))
        .where(ref.c.target_type == "Encounter")
        .scalar_subquery()
    )
    profiled = select(uri.c.rid).where(
        uri.c.param_key.in_(profile_keys), uri.c.value.in_(ENCOUNTER_END_PROFILES)
    )
    stmt = update(r).where(r.c.res_type == rtype, r.c.session == m.SHARED_RECORD, r.c.rid.in_(profiled))
    if by_rids:
        stmt = stmt.where(r.c.rid.in_(RIDS))
    return stmt.values(clinical_time=func.coalesce(end, MAX_US - 1))
