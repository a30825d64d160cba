"""Write and remove the search-index rows of current resources (store and loader)."""

from __future__ import annotations

from sqlalchemy import Connection, delete, insert

from services.fhir_api.search.extract import index_rows, index_tuples
from services.fhir_api.store import models as m


def rows_for(row_id: int, resource: dict) -> dict[str, list[dict]]:
    """Index rows of one resource, keyed by index type."""
    rtype = resource["resourceType"]
    return {
        kind: [{"rid": row_id, "res_type": rtype, **row} for row in rows]
        for kind, rows in index_rows(resource).items()
    }


TABLES = m.INDEX_TABLES


def row_tuples(resource: dict) -> dict[str, list[tuple]]:
    """The rows of `rows_for` as tuples in table column order without the leading rid (bulk load's COPY)."""
    return index_tuples(resource, (resource["resourceType"],))


def index_resource(conn: Connection, row_id: int, resource: dict) -> None:
    for kind, rows in rows_for(row_id, resource).items():
        if rows:
            conn.execute(insert(TABLES[kind]), rows)


def unindex(conn: Connection, row_ids: list[int]) -> None:
    for table in TABLES.values():
        conn.execute(delete(table).where(table.c.rid.in_(row_ids)))
