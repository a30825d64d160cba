"""Every fact of every scenario built from the demo is what an assistant can find in the sandbox: each
resource a fact or a patient-memory fact names is visible in a session at the scenario's `now`, a "latest"
result has no visible later result of its code, and the patient's memory holds no diagnosis of the stay in
progress (billed at discharge)."""

from __future__ import annotations

import orjson
import pytest

from services.fhir_api.store.interface import Context, SearchRequest
from services.simulator.scenarios.reader import _med_name
from services.simulator.scenarios.vocabulary import drug_identity


def _refs(fact) -> list[str]:
    return [r for r in fact.sources if "/" in r and not r.startswith("urn:")]


def _visible(store, ctx, refs: set[str]) -> set[str]:
    by_type: dict[str, list[str]] = {}
    for ref in refs:
        rtype, rid = ref.split("/", 1)
        by_type.setdefault(rtype, []).append(rid)
    seen = set()
    for rtype, ids in by_type.items():
        found = store.search(ctx, SearchRequest(rtype, [("_id", ",".join(sorted(ids)))], count=len(ids)))
        seen |= {f"{rtype}/{m.id}" for m in found.matches}
    return seen


def _ongoing(store, ctx, encounter: str | None) -> bool:
    """The scenario's stay is still going on at the session's clock (its view has no end)."""
    if not encounter:
        return False
    found = store.search(ctx, SearchRequest("Encounter", [("_id", encounter.split("/")[1])])).matches
    return bool(found) and "end" not in orjson.loads(found[0].raw).get("period", {})


@pytest.mark.slow
def test_active_medication_counts_are_the_sandboxs_active_orders(demo_build, demo_app) -> None:
    """An active-orders fact counts one per drug over the whole record: exactly the distinct drugs of the
    patient's orders the sandbox shows `active` at `now` (not only the builder's vocabulary drugs)."""
    store, checked, wrong = demo_app.state.store, 0, []
    for scenario in demo_build.scenarios:
        facts = [f for t in scenario.turns for f in t.facts if f.code == "urn:rounds:active-orders"]
        if not facts:
            continue
        ctx = store.get_session(store.create_session(scenario.now))
        pid = scenario.patient.removeprefix("Patient/")
        query = [("patient", pid), ("status", "active"), ("_include", "MedicationRequest:medication")]
        result = store.search(ctx, SearchRequest("MedicationRequest", query, count=5000))
        medications = {f"Medication/{m.id}": orjson.loads(m.raw) for m in result.includes}
        names = [_med_name(orjson.loads(r.raw), medications) for r in result.matches]
        drugs = {drug for name in names if (drug := drug_identity(name)) is not None}
        active = {f"MedicationRequest/{r.id}" for r in result.matches}
        for fact in facts:
            checked += 1
            if fact.value != len(drugs) or not set(fact.references) <= active:
                wrong.append(f"{scenario.id}: {fact.value} drugs, sandbox {len(drugs)}: {sorted(drugs)[:4]}")
        store.drop_session(ctx.session_id)
    print(f"\n{checked} active-orders facts, {len(wrong)} differ from the sandbox")
    assert checked > 15
    assert not wrong, wrong[:5]


@pytest.mark.slow
def test_every_fact_is_visible_at_now_and_every_latest_is_the_latest(demo_build, demo_app) -> None:
    store = demo_app.state.store
    facts = refs_checked = latest_checked = memory_sources = stays = 0
    hidden: list[str] = []
    not_latest: list[str] = []
    current_stay: list[str] = []
    for scenario in demo_build.scenarios:
        ctx = store.get_session(store.create_session(scenario.now))
        wanted: set[str] = set()
        for turn in scenario.turns:
            for fact in turn.facts:
                facts += 1
                wanted |= set(_refs(fact))
        memory = {s for m in scenario.patient_memory for s in m.sources}
        memory_sources += len(memory)
        seen = _visible(store, ctx, wanted | memory)
        refs_checked += len(wanted)
        hidden += [f"{scenario.id}: {r}" for r in sorted((wanted | memory) - seen)]
        pid = scenario.patient.removeprefix("Patient/")
        for turn in scenario.turns:
            for fact in turn.facts:
                if fact.kind != "latest" or not fact.code or fact.time is None or not fact.reference:
                    continue
                if not fact.reference.startswith("Observation/"):
                    continue
                latest_checked += 1
                later = store.search(
                    ctx,
                    SearchRequest(
                        "Observation",
                        [("patient", pid), ("code", fact.code), ("date", f"gt{fact.time.isoformat()}")],
                        count=5,
                    ),
                ).matches
                if later:
                    not_latest.append(f"{scenario.id}: {fact.reference} at {fact.time}, later {later[0].id}")
        conditions = sorted(s for s in memory if s.startswith("Condition/"))
        stay = _ongoing(store, ctx, scenario.encounter)
        if stay and conditions:  # the whole record: a current-stay code the session hides still counts
            ids = ",".join(c.split("/")[1] for c in conditions)
            query = [("_id", ids), ("encounter", scenario.encounter)]
            found = store.search(Context(), SearchRequest("Condition", query, count=len(conditions))).matches
            current_stay += [f"{scenario.id}: Condition/{c.id}" for c in found]
        stays += bool(stay)
        store.drop_session(ctx.session_id)
    print(
        f"\n{len(demo_build.scenarios)} scenarios, {facts} facts: {refs_checked} referenced resources and "
        f"{memory_sources} memory sources checked visible at now ({len(hidden)} not), {latest_checked} "
        f"'latest' facts checked latest ({len(not_latest)} not); {stays} sessions mid-stay, "
        f"{len(current_stay)} current-stay diagnoses in the patient's memory"
    )
    assert facts > 1000 and latest_checked > 300
    assert not hidden, hidden[:10]
    assert not not_latest, not_latest[:10]
    assert not current_stay, current_stay[:10]
