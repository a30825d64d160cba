"""Write and remove the search-index rows of current resources (store and loader)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Connection, delete, insert

from services.fhir_api.search.extract import index_tuples
from services.fhir_api.search.keys import NO_PATIENT, patient_key, patient_rows
from services.fhir_api.store import models as m

TABLES = m.INDEX_TABLES


def row_tuples(resource: dict) -> dict[str, list[tuple]]:
    """Index rows of one resource by index type, as tuples in table column order without the leading rid
    (the bulk load's COPY and the store's inserts: one source of rows for both)."""
    rtype = resource["resourceType"]
    out = index_tuples(resource, named=False)
    if out["token"]:
        owner = (_patient_key(rtype, out["reference"]),)
        out["token"] = [row + owner for row in out["token"]]
    return out


def _patient_key(resource_type: str, references: list[tuple]) -> int:
    """keys.patient_key of the resource's one patient (its `patient` parameter's target), else NO_PATIENT.
    `references`: its reference rows, (param_key, target type, target id, url)."""
    wanted = patient_rows(resource_type)
    if not wanted:
        return NO_PATIENT
    ids = set()
    for row in references:
        if row[0] in wanted and wanted[row[0]] in (None, row[1]) and row[2]:
            ids.add(row[2])
    return patient_key(ids.pop()) if len(ids) == 1 else NO_PATIENT


def index_resource(conn: Connection, row_id: int, resource: dict) -> None:
    index_resources(conn, [(row_id, resource)])


def index_resources(conn: Connection, resources: Iterable[tuple[int, dict]]) -> None:
    """Insert the index rows of (rid, resource) pairs: one executemany per index table for all of them."""
    by_kind: dict[str, list[tuple]] = {}
    for row_id, resource in resources:
        for kind, rows in row_tuples(resource).items():
            by_kind.setdefault(kind, []).extend((row_id, *row) for row in rows)
    for kind, rows in by_kind.items():
        if rows:
            names = [c.name for c in TABLES[kind].columns]
            conn.execute(insert(TABLES[kind]), [dict(zip(names, row, strict=True)) for row in rows])


def unindex(conn: Connection, row_ids: list[int]) -> None:
    for table in TABLES.values():
        conn.execute(delete(table).where(table.c.rid.in_(row_ids)))
