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

from sqlalchemy import Connection, and_, func, or_, select, update

from services.fhir_api.search.keys import stored_keys
from services.fhir_api.search.values import MAX_US
from services.fhir_api.store import models as m
from services.fhir_api.store.known_time import (
    ENCOUNTER_END_PROFILES,
    INHERIT,
    INHERIT_FROM_REFERRERS,
    UNTIMED,
)


def settle_times(conn: Connection, rids: list[int] | None = None, types: set[str] | None = None) -> None:
    """Inherited clinical times, then dated reference rows, of the given shared rows (None: all); `types`:
    the only resource types among them, when the caller knows (a write: no statement for other types)."""
    if rids is not None and not rids:
        return
    r, ref = m.resource, m.reference
    _encounter_ends(conn, rids, types)
    for rtype, names in INHERIT.items():
        if types is not None and rtype not in types:
            continue
        keys = [key for name in names for key, _ in stored_keys(rtype, name)]
        p = m.resource.alias("p")
        parent = (
            select(func.max(p.c.clinical_time))
            .select_from(ref)
            .join(p, and_(p.c.res_type == ref.c.target_type, p.c.res_id == ref.c.target_id))
            .where(ref.c.rid == r.c.rid, ref.c.param_key.in_(keys), p.c.session == "")
            .scalar_subquery()
        )
        stmt = update(r).where(r.c.res_type == rtype, r.c.session == "", r.c.clinical_time.is_(None))
        if rids is not None:
            stmt = stmt.where(r.c.rid.in_(rids))
        conn.execute(stmt.values(clinical_time=parent))
    for rtype, pairs in INHERIT_FROM_REFERRERS.items():
        if types is not None and types.isdisjoint({rtype, *(src for src, _ in pairs)}):
            continue
        keys = [key for src, name in pairs for key, _ in stored_keys(src, name)]
        o = m.resource.alias("o")
        first = (
            select(func.min(o.c.clinical_time))
            .select_from(ref)
            .join(o, o.c.rid == ref.c.rid)
            .where(
                ref.c.param_key.in_(keys),
                ref.c.target_type == rtype,
                ref.c.target_id == r.c.res_id,
                o.c.session == "",
            )
            .scalar_subquery()
        )
        stmt = update(r).where(r.c.res_type == rtype, r.c.session == "", r.c.clinical_time.is_(None))
        if rids is not None:  # the written resource itself, or what it refers to
            targets = select(ref.c.target_id).where(ref.c.rid.in_(rids), ref.c.param_key.in_(keys))
            stmt = stmt.where(or_(r.c.rid.in_(rids), r.c.res_id.in_(targets)))
        conn.execute(stmt.values(clinical_time=first))
    t, s, u = m.resource.alias("t"), m.resource.alias("s"), m.resource.alias("u")
    target = (
        select(t.c.clinical_time)
        .where(t.c.session == "", t.c.res_type == ref.c.target_type, t.c.res_id == ref.c.target_id)
        .scalar_subquery()
    )
    source = select(s.c.clinical_time).where(s.c.rid == ref.c.rid).scalar_subquery()
    floor = -(2**62)
    stmt = update(ref).where(
        ref.c.target_type.is_not(None),
        ref.c.target_type.not_in(UNTIMED),
        ref.c.rid.in_(select(u.c.rid).where(u.c.session == "", *([u.c.rid.in_(rids)] if rids else []))),
        target > func.coalesce(source, floor),
        target > func.coalesce(ref.c.since, floor),
    )
    conn.execute(stmt.values(since=target))


def _encounter_ends(conn: Connection, rids: list[int] | None, types: set[str] | None) -> None:
    """Shared rows whose profile is known at its encounter's end get that end (µs, its last instant) as their
    clinical time; MAX_US - 1 when the Encounter is stored without an end or not at all."""
    if not ENCOUNTER_END_PROFILES:
        return
    r, ref, uri, date = m.resource, m.reference, m.uri, m.date
    e = m.resource.alias("e")
    for rtype in ("Condition", "Procedure"):
        if types is not None and rtype not in types:
            continue
        profile_keys = [key for key, _ in stored_keys(rtype, "_profile")]
        encounter_keys = [key for key, _ in stored_keys(rtype, "encounter")]
        period_keys = [key for key, _ in stored_keys("Encounter", "date")]
        end = (
            select(func.max(date.c.high) - 1)
            .select_from(ref)
            .join(e, and_(e.c.res_type == "Encounter", e.c.res_id == ref.c.target_id, e.c.session == ""))
            .join(
                date,
                and_(date.c.rid == e.c.rid, date.c.param_key.in_(period_keys), date.c.until.is_(None)),
            )
            .where(ref.c.rid == r.c.rid, ref.c.param_key.in_(encounter_keys))
            .where(ref.c.target_type == "Encounter")
            .scalar_subquery()
        )
        profiled = select(uri.c.rid).where(
            uri.c.param_key.in_(profile_keys), uri.c.value.in_(ENCOUNTER_END_PROFILES)
        )
        stmt = update(r).where(r.c.res_type == rtype, r.c.session == "", r.c.rid.in_(profiled))
        if rids is not None:
            stmt = stmt.where(r.c.rid.in_(rids))
        conn.execute(stmt.values(clinical_time=func.coalesce(end, MAX_US - 1)))
