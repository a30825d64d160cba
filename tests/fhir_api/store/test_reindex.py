"""`rounds reindex` rebuilds index rows from the stored JSON: rows missing after a change of the search
parameters come back, nothing else changes, the shared record and session overlays alike, and bad input is
refused before anything is touched."""

from __future__ import annotations

import pytest
from sqlalchemy import delete, func, select
from typer.testing import CliRunner

from rounds.cli import app
from services.fhir_api.reindex import reindex
from services.fhir_api.store import models as m
from services.fhir_api.store.interface import Context, SearchRequest

LOINC = "http://loinc.org"
SESSION = Context(session_id="s-reindex")


def _bp(rid: str, diastolic: float) -> dict:
    return {
        "resourceType": "Observation", "id": rid, "status": "final",
        "code": {"coding": [{"system": LOINC, "code": "85354-9"}]},
        "subject": {"reference": "Patient/p1"},
        "component": [{"code": {"coding": [{"system": LOINC, "code": "8462-4"}]},
                       "valueQuantity": {"value": diastolic}}],
    }


def _counts(store) -> dict[str, int]:
    with store.engine.connect() as conn:
        count = lambda t: conn.execute(select(func.count()).select_from(t)).scalar_one()  # noqa: E731
        return {kind: count(table) for kind, table in m.INDEX_TABLES.items()}


def _high(store, ctx: Context = Context()) -> set[str]:
    request = SearchRequest("Observation", [("component-code-value-quantity", "8462-4$gt100")])
    return {r.id for r in store.search(ctx, request).matches}


def test_reindex_restores_missing_rows_and_changes_nothing_else(store, database_url) -> None:
    store.update(Context(), "Patient", "p1", {"resourceType": "Patient", "id": "p1", "gender": "male"})
    store.update(Context(), "Observation", "shared", _bp("shared", 110))
    store.update(SESSION, "Observation", "mine", _bp("mine", 120))
    store.update(Context(), "Observation", "gone", _bp("gone", 130))
    store.delete(Context(), "Observation", "gone")
    before = _counts(store)
    assert _high(store) == {"shared"} and _high(store, SESSION) == {"shared", "mine"}
    with store.engine.begin() as conn:  # an index written before these rows existed: none for Observations
        observations = select(m.resource.c.rid).where(m.resource.c.res_type == "Observation")
        for table in m.INDEX_TABLES.values():
            conn.execute(delete(table).where(table.c.rid.in_(observations)))
    assert _high(store) == set() and _high(store, SESSION) == set()

    report = reindex(store.engine, ["Observation"], batch=1)  # one resource per transaction
    assert report.resources == 2  # the deleted one has no rows to rebuild
    assert _counts(store) == before
    assert _high(store) == {"shared"} and _high(store, SESSION) == {"shared", "mine"}
    assert reindex(store.engine).resources == 3  # every type, again: the same rows
    assert _counts(store) == before


def test_reindex_refuses_unknown_types(store, database_url) -> None:
    with pytest.raises(ValueError, match="unknown resource type"):
        reindex(store.engine, ["Observation", "Bogus"])
    result = CliRunner().invoke(app, ["reindex", "--type", "Bogus", "--database-url", database_url])
    assert result.exit_code == 2 and "unknown resource type(s): Bogus" in result.output
    store.update(Context(), "Observation", "o1", _bp("o1", 90))
    result = CliRunner().invoke(app, ["reindex", "--type", "Observation", "--database-url", database_url])
    assert result.exit_code == 0 and "re-indexed 1 resources" in result.output
