"""Write and remove the search-index and compartment rows of current resources (store and loader)."""

from __future__ import annotations

from sqlalchemy import Connection, delete, insert

from services.fhir_api.search.extract import index_rows, index_tuples
from services.fhir_api.search.scope import compartment_patients
from services.fhir_api.store import models as m


def rows_for(row_id: int, resource: dict) -> dict[str, list[dict]]:
    """Index rows of one resource, keyed by table name (index types plus 'compartment')."""
    rtype = resource["resourceType"]
    out = {
        kind: [{"rid": row_id, "res_type": rtype, **row} for row in rows]
        for kind, rows in index_rows(resource).items()
    }
    out["compartment"] = [
        {"rid": row_id, "patient_id": p, "res_type": rtype} for p in compartment_patients(resource)
    ]
    return out


TABLES = {**m.INDEX_TABLES, "compartment": m.compartment}


def row_tuples(resource: dict) -> dict[str, list[tuple]]:
    """The rows of `rows_for` as tuples in table column order without the leading rid (bulk load's COPY)."""
    rtype = resource["resourceType"]
    out: dict[str, list[tuple]] = index_tuples(resource, (rtype,))
    out["compartment"] = [(p, rtype) for p in compartment_patients(resource)]
    return out


def index_resource(conn: Connection, row_id: int, resource: dict) -> None:
    for kind, rows in rows_for(row_id, resource).items():
        if rows:
            conn.execute(insert(TABLES[kind]), rows)


def unindex(conn: Connection, row_ids: list[int]) -> None:
    for table in TABLES.values():
        conn.execute(delete(table).where(table.c.rid.in_(row_ids)))
