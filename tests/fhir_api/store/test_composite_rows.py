"""The rows of composites over a repeating element (Observation.component) come with every way a resource
is indexed: the bulk load (COPY on PostgreSQL, inserts on SQLite) and the store's writes; a search pairs
the code and value of one component on both backends."""

from __future__ import annotations

import orjson

from services.fhir_api.store.interface import Context, SearchRequest
from tests.wiring import load_on

LOINC = "http://loinc.org"
SHARED = Context()


def _bp(rid: str, systolic: float, diastolic: float) -> dict:
    def part(code: str, value: float) -> dict:
        return {"code": {"coding": [{"system": LOINC, "code": code}]}, "valueQuantity": {"value": value}}

    return {"resourceType": "Observation", "id": rid, "status": "final",
            "code": {"coding": [{"system": LOINC, "code": "85354-9"}]},
            "component": [part("8480-6", systolic), part("8462-4", diastolic)]}


def _found(store, value: str, ctx: Context = SHARED, name: str = "component-code-value-quantity") -> set[str]:
    request = SearchRequest("Observation", [(name, value)])
    return {r.id for r in store.search(ctx, request).matches}


def test_loaded_and_written_components_pair_within_one_component(store, tmp_path, database_url) -> None:
    folder = tmp_path / "ndjson"
    folder.mkdir()
    lines = [orjson.dumps(_bp("high", 162, 95)), orjson.dumps(_bp("normal", 118, 76))]
    (folder / "MimicObservationVitals.ndjson").write_bytes(b"\n".join(lines) + b"\n")
    report = load_on(database_url, folder, workers=1)
    assert (report.resources, report.errors) == (2, 0)
    assert _found(store, "8480-6$gt140") == {"high"}
    assert _found(store, "8462-4$gt100") == set()  # 162 is a systolic: not this pair
    assert _found(store, f"{LOINC}|8462-4$lt80") == {"normal"}
    # The resource's own pair (code-value-quantity) and both halves of combo-, through the same plans.
    store.update(SHARED, "Observation", "k", {"resourceType": "Observation", "id": "k", "status": "final",
                                              "code": {"coding": [{"system": LOINC, "code": "2823-3"}]},
                                              "valueQuantity": {"value": 5.6}})
    assert _found(store, "2823-3$gt5", name="code-value-quantity") == {"k"}
    assert _found(store, "2823-3$gt5,8480-6$gt140", name="combo-code-value-quantity") == {"k", "high"}
    # A session's own write is indexed the same way and shadows the shared row it updates.
    session = Context(session_id="s-composite")
    store.update(session, "Observation", "normal", _bp("normal", 145, 101))
    assert _found(store, "8462-4$gt100", session) == {"normal"}
    assert _found(store, "8462-4$gt100") == set()
