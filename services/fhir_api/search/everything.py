"""Patient/$everything: the Patient, then its compartment (CompartmentDefinition-patient) grouped by type,
with the session clock applied, `_since` / `_type`, and the Medications, Locations, Organizations and
Practitioners the page refers to. Pages continue by keyset cursor (search/cursor.py) over (patient first,
type, rid), so resources deleted between two page requests never shift the rest."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, case, func, or_, select

from services.fhir_api.search import cursor
from services.fhir_api.search import query as q
from services.fhir_api.search.engine import fetch, forward_rids
from services.fhir_api.search.keys import compartment_keys
from services.fhir_api.store import models as m
from services.fhir_api.store.interface import Context, Cursor, NotFound, SearchResult

OUTSIDE = ("Medication", "Location", "Organization", "Practitioner")  # referred to, outside the compartment


def everything(
    conn: Connection,
    ctx: Context,
    patient_id: str,
    since: datetime | None,
    types: list[str] | None,
    count: int,
    offset: int,
    at: Cursor | None = None,
) -> SearchResult:
    r = q.R
    patient = conn.execute(
        select(r.c.rid).where(r.c.res_type == "Patient", r.c.res_id == patient_id, q.visible(r, ctx))
    ).scalar()
    if patient is None:
        raise NotFound(f"Patient/{patient_id} not found")
    ref = m.reference  # the compartment: whatever refers to the Patient through a compartment parameter
    members = select(ref.c.rid).where(
        ref.c.param_key.in_(compartment_keys()), ref.c.target_id == patient_id, ref.c.target_type == "Patient"
    )
    stmt = select(r.c.rid, r.c.res_type).where(q.visible(r, ctx))
    stmt = stmt.where(or_(r.c.rid == patient, r.c.rid.in_(members)))
    if since is not None:
        stmt = stmt.where(r.c.last_updated >= since)
    if types:
        stmt = stmt.where(r.c.res_type.in_(types))
    total = conn.execute(select(func.count()).select_from(stmt.subquery())).scalar_one()
    keys = [(case((r.c.rid == patient, 0), else_=1), False), (r.c.res_type, False)]
    result = SearchResult([], [], total)
    if at is not None:
        values = cursor.bind_values(at, (*(key for key, _ in keys), r.c.rid))
        stmt = stmt.where(cursor.beyond(keys, r.c.rid, at.direction, cursor.nulls(at))).params(values)
    rows = conn.execute(stmt.order_by(*cursor.walk(keys, r.c.rid, at)).limit(count + 1).offset(offset)).all()
    if at is not None and at.direction == "before":
        rows.reverse()  # walked backwards from the cursor

    def position(row) -> tuple:  # the keys above, then rid
        return int(row.rid != patient), row.res_type, row.rid

    page = cursor.window(result, rows, count, at, offset, position)
    result.matches = fetch(conn, [row.rid for row in page])
    if result.matches:
        referenced = list(dict.fromkeys(forward_rids(conn, ctx, result.matches, "", "*", None)))
        result.includes = [s for s in fetch(conn, referenced) if s.resource_type in OUTSIDE]
    return result
