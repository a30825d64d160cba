"""Write and remove the search-index rows of current resources (store and loader)."""

from __future__ import annotations

from sqlalchemy import Connection, delete, insert

from services.fhir_api.search.extract import index_rows, index_tuples
from services.fhir_api.search.keys import NO_PATIENT, patient_key, patient_rows
from services.fhir_api.store import models as m


def rows_for(row_id: int, resource: dict) -> dict[str, list[dict]]:
    """Index rows of one resource, keyed by index type."""
    rtype = resource["resourceType"]
    out = {
        kind: [{"rid": row_id, "res_type": rtype, **row} for row in rows]
        for kind, rows in index_rows(resource).items()
    }
    refs = [(r["param_key"], r["target_type"], r["target_id"]) for r in out["reference"]]
    owner = _patient_key(rtype, refs)
    for row in out["token"]:
        row["patient_key"] = owner
    return out


TABLES = m.INDEX_TABLES


def row_tuples(resource: dict) -> dict[str, list[tuple]]:
    """The rows of `rows_for` as tuples in table column order without the leading rid (bulk load's COPY)."""
    rtype = resource["resourceType"]
    out = index_tuples(resource, (rtype,))
    if out["token"]:
        owner = (_patient_key(rtype, [row[2:5] for row in out["reference"]]),)
        out["token"] = [row + owner for row in out["token"]]
    return out


def _patient_key(resource_type: str, refs: list[tuple]) -> int:
    """keys.patient_key of the resource's one patient (its `patient` parameter's target), else NO_PATIENT.
    `refs`: (param_key, target type, target id) of its reference rows."""
    wanted = patient_rows(resource_type)
    if not wanted:
        return NO_PATIENT
    ids = {tid for key, ttype, tid in refs for k, t in wanted if key == k and t in (None, ttype) and tid}
    return patient_key(ids.pop()) if len(ids) == 1 else NO_PATIENT


def index_resource(conn: Connection, row_id: int, resource: dict) -> None:
    for kind, rows in rows_for(row_id, resource).items():
        if rows:
            conn.execute(insert(TABLES[kind]), rows)


def unindex(conn: Connection, row_ids: list[int]) -> None:
    for table in TABLES.values():
        conn.execute(delete(table).where(table.c.rid.in_(row_ids)))
