"""The default build of the MIMIC-IV demo, checked as a physician would: every time it writes is in the ward's
local time (the offset the record itself uses at that instant), every normal/abnormal decision is traced to
the result's own reference range where the Observation has one, and every treatment-response session rests on
a dose the MAR shows given between the value before and the value after."""

from __future__ import annotations

import re
from datetime import datetime

import orjson
import pytest

from services.fhir_api.store.interface import Context, SearchRequest
from services.simulator.scenarios.clock import local

ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2})?")


def _times(node) -> list[str]:
    if isinstance(node, dict):
        return [t for value in node.values() for t in _times(value)]
    if isinstance(node, list):
        return [t for value in node for t in _times(value)]
    return ISO.findall(node) if isinstance(node, str) else []


def _read(store, ref: str) -> dict:
    rtype, rid = ref.split("/", 1)
    found = store.search(Context(), SearchRequest(rtype, [("_id", rid)])).matches
    assert found, f"{ref} is not in the record"
    return orjson.loads(found[0].raw)


@pytest.mark.slow
def test_every_time_in_every_demo_scenario_is_in_the_wards_offset(demo_build, demo_app) -> None:
    """`now`, facts' times and windows, write constraints and example resources: each written with the
    offset the record's own times carry at that instant (the encounter's: -05:00 in winter, -04:00 in summer),
    never UTC; "tomorrow at 8 am" is 08:00 on the ward."""
    store, checked, outside, mornings = demo_app.state.store, 0, [], 0
    for scenario in demo_build.scenarios:
        line = orjson.loads(scenario.model_dump_json(exclude_none=True))
        if scenario.encounter:
            start = datetime.fromisoformat(_read(store, scenario.encounter)["period"]["start"])
            assert start.utcoffset() == local(start).utcoffset(), f"{scenario.encounter}: not the ward's zone"
        for text in _times(line):
            checked += 1
            when = datetime.fromisoformat(text)
            if when.tzinfo is None or text.endswith("Z") or when.utcoffset() != local(when).utcoffset():
                outside.append(f"{scenario.id}: {text}")
        for turn in scenario.turns:
            for write in turn.writes:
                due = write.resource.get("occurrenceDateTime")
                if due:
                    mornings += 1
                    assert datetime.fromisoformat(due).strftime("%H:%M") == "08:00", (scenario.id, due)
    print(f"\n{len(demo_build.scenarios)} scenarios: {checked} times, {len(outside)} outside the ward's "
          f"offset, {mornings} 'tomorrow 8 am' orders at 08:00 local")
    assert checked > 3000 and mornings > 10
    assert not outside, outside[:10]


@pytest.mark.slow
def test_every_range_decision_is_traced_to_the_observations_own_range(demo_build, demo_app) -> None:
    store, own, vocabulary, wrong = demo_app.state.store, 0, 0, []
    for scenario in demo_build.scenarios:
        for turn in scenario.turns:
            for fact in turn.facts:
                if fact.code != "urn:rounds:rule|reference_range":
                    continue
                ranges = _read(store, fact.reference).get("referenceRange") or [{}]
                low, high = ((ranges[0].get(k) or {}).get("value") for k in ("low", "high"))
                extra = fact.model_extra or {}
                if low is None and high is None:
                    vocabulary += 1
                    ok = extra["range_source"] == "vocabulary"
                else:
                    own += 1
                    ok = (extra["range_source"], extra["low"], extra["high"]) == ("record", low, high)
                if not ok:
                    wrong.append(f"{scenario.id}: {fact.reference} {extra} vs the record's {low}-{high}")
    print(f"\n{own + vocabulary} range decisions: {own} on the Observation's own range, {vocabulary} on the "
          f"vocabulary's (no range on the record), {len(wrong)} wrong")
    assert own > 10
    assert not wrong, wrong[:5]


@pytest.mark.slow
def test_treatment_response_rests_on_a_dose_the_mar_shows_given(demo_build, demo_app) -> None:
    """"Before we gave that" is the value known when the last dose before the latest value was given: the
    dose is a MedicationAdministration of the record, given after that value and by `now`."""
    store, sessions, chained = demo_app.state.store, 0, 0
    for scenario in (s for s in demo_build.scenarios if s.family == "treatment_response"):
        sessions += 1
        for fact in (f for t in scenario.turns for f in t.facts):
            dose_ref = (fact.model_extra or {}).get("at_event") or fact.reference or ""
            if not dose_ref.startswith("MedicationAdministration/"):
                continue
            given = datetime.fromisoformat(_read(store, dose_ref)["effectiveDateTime"])
            assert given <= scenario.now, (scenario.id, dose_ref)
            if fact.kind == "value_at":
                chained += 1
                assert fact.time <= given, (scenario.id, fact.reference, dose_ref)
    print(f"\n{sessions} treatment-response sessions, {chained} values before a dose given")
    assert sessions > 10 and chained > 5
