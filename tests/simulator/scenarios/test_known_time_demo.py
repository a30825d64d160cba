"""On the real MIMIC-IV demo: a stay's billed diagnoses are not visible during the stay (hosp/diagnoses_icd is
coded at discharge), on any search path, at the midpoint of every admission; they are once it has ended."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest

from services.fhir_api.search.values import date_range, from_us
from services.fhir_api.store.interface import Context, SearchRequest


def _all(store, ctx, rtype: str, params: list[tuple[str, str]]) -> list[dict]:
    result = store.search(ctx, SearchRequest(rtype, params, count=100_000))
    return [orjson.loads(item.raw) for item in result.matches]


@pytest.mark.slow
def test_no_current_stay_diagnosis_is_visible_mid_admission_on_the_demo(demo_app) -> None:
    store, shared = demo_app.state.store, Context()
    by_encounter: dict[str, set[str]] = {}
    for cond in _all(store, shared, "Condition", []):
        by_encounter.setdefault(cond["encounter"]["reference"], set()).add(cond["id"])
    encounters = {f"Encounter/{e['id']}": e for e in _all(store, shared, "Encounter", [])}
    admissions = visible_mid = visible_after = 0
    leaks: list[str] = []
    for ref, ids in sorted(by_encounter.items()):
        enc = encounters[ref]
        start, end = date_range(enc["period"]["start"])[0], date_range(enc["period"]["end"])[1]
        pid = enc["subject"]["reference"].removeprefix("Patient/")
        mid = store.get_session(store.create_session(from_us((start + end) // 2)))
        admissions += 1
        seen = {c["id"] for c in _all(store, mid, "Condition", [("patient", pid)])}
        seen |= {c["id"] for c in _all(store, mid, "Condition", [("encounter", ref)])}
        revinclude = store.search(
            mid,
            SearchRequest("Encounter", [("_id", ref.split("/")[1]), ("_revinclude", "Condition:encounter")]),
        )
        seen |= {i.id for i in revinclude.includes if i.resource_type == "Condition"}
        counted = store.search(
            mid, SearchRequest("Condition", [("encounter", ref)], count=0, total="accurate")
        ).total
        everything = store.everything(mid, pid, types=("Condition",), count=1000)
        seen |= {m.id for m in everything.matches if m.resource_type == "Condition"}
        current = seen & ids
        visible_mid += len(current) + (counted or 0)
        if current or counted:
            leaks.append(f"{ref} at {from_us((start + end) // 2)}: {sorted(current)[:3]} count={counted}")
        store.drop_session(mid.session_id)
        after = store.get_session(store.create_session(datetime.fromtimestamp(end / 1e6 + 1, UTC)))
        visible_after += len({c["id"] for c in _all(store, after, "Condition", [("encounter", ref)])} & ids)
        store.drop_session(after.session_id)
    print(f"\n{admissions} admissions at their midpoint: {visible_mid} current-stay diagnoses visible")
    assert admissions > 200
    assert visible_mid == 0, leaks[:5]
    assert visible_after == sum(len(ids) for ids in by_encounter.values())
