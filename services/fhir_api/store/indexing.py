"""Write and remove the search-index rows of current resources (store and loader)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Connection, delete

from foundation.db import insert_rows
from services.fhir_api.search.extract import index_tuples
from services.fhir_api.search.keys import NO_PATIENT, as_of_key, patient_key, patient_rows
from services.fhir_api.store import models as m
from services.fhir_api.store.known_time import VIEWS, clinical_time
from services.fhir_api.store.views import timed_views

TABLES = m.INDEX_TABLES


OPEN = (None, None)  # (since, until): the row holds at every clock


def row_tuples(resource: dict, timed: bool = False) -> dict[str, list[tuple]]:
    """Index rows of one resource by index type, as tuples in table column order without the leading rid
    (the bulk load's COPY and the store's inserts: one source of rows for both). `timed` (shared resources):
    rows are extracted from each of the resource's as-of views too and hold only while theirs does."""
    if timed and resource.get("resourceType") in VIEWS:
        views = timed_views(resource, clinical_time(resource))
        if views:
            return _timed_rows([(since, until, _plain_rows(view)) for since, until, view in views])
    return {kind: [row + OPEN for row in rows] for kind, rows in _plain_rows(resource).items()}


def _plain_rows(resource: dict) -> dict[str, list[tuple]]:
    rtype = resource["resourceType"]
    out = index_tuples(resource, named=False)
    if out["token"]:
        owner = (_patient_key(rtype, out["reference"]),)
        out["token"] = [row + owner for row in out["token"]]
    return out


def _timed_rows(views: list[tuple[int | None, int | None, dict[str, list[tuple]]]]) -> dict[str, list[tuple]]:
    """Rows of successive views (since, until, rows): a row in the last view holds from the start of the
    unbroken run of views it is in up to it (`since`, NULL when in every view); a run of views that ends
    before the last is stored under the parameter's as-of key with its `since` and `until`."""
    out: dict[str, list[tuple]] = {}
    for kind in dict.fromkeys(k for _, _, rows in views for k in rows):
        present: dict[tuple, list[int]] = {}
        for i, (_, _, rows) in enumerate(views):
            for row in dict.fromkeys(rows.get(kind, ())):
                present.setdefault(row, []).append(i)
        found = out.setdefault(kind, [])
        for row, seen in present.items():
            first = 0
            for j, i in enumerate(seen):
                if j + 1 < len(seen) and seen[j + 1] == i + 1:
                    continue  # the run goes on
                since, until = views[seen[first]][0], views[i][1]
                if until is None:
                    found.append(row + (since, None))
                else:
                    found.append((as_of_key(row[0]), *row[1:], since, until))
                first = j + 1
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


def index_resource(conn: Connection, row_id: int, resource: dict, timed: bool = False) -> None:
    index_resources(conn, [(row_id, resource)], timed)


def index_resources(conn: Connection, resources: Iterable[tuple[int, dict]], timed: bool = False) -> None:
    """Insert the index rows of (rid, resource) pairs: one executemany per index table for all of them.
    `timed`: shared resources (row_tuples)."""
    by_kind: dict[str, list[tuple]] = {}
    for row_id, resource in resources:
        for kind, rows in row_tuples(resource, timed).items():
            by_kind.setdefault(kind, []).extend((row_id, *row) for row in rows)
    for kind, rows in by_kind.items():
        insert_rows(conn, TABLES[kind], rows)


def unindex(conn: Connection, row_ids: list[int]) -> None:
    for table in TABLES.values():
        conn.execute(delete(table).where(table.c.rid.in_(row_ids)))
