"""The known-time rule is one data file (store/known_time.json) that the store's clock, its views, its search
index and the scenario builder all read: each rule carries a reason from the MIMIC-IV documentation, no second
copy of the rule exists anywhere, and the store applies it (a billed diagnosis or ICD procedure is hidden
until its encounter's end, also from searches, _revinclude and counts)."""

from __future__ import annotations

import ast
import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from services.fhir_api.store import known_time
from services.fhir_api.store.interface import Context, SearchRequest
from tests.conftest import SHARED_DATA

ROOT = Path(__file__).resolve().parents[3]
REFERENCE = SHARED_DATA.parent / "REFERENCE.md"  # ../shared beside the checkout (tests/conftest.py finds it)
PROFILE = "http://mimic.mit.edu/fhir/mimic/StructureDefinition/mimic-"
RULE_FILE = "known_time.json"
MIMIC_TABLE = re.compile(r"\b(?:hosp|icu|ed|note)/[a-z_]+")


def _known_section() -> str:
    text = REFERENCE.read_text() if REFERENCE.exists() else ""
    return text.partition("## When each MIMIC-IV fact became known")[2].partition("\n## ")[0]


def test_every_rule_has_a_reason_citing_the_mimic_documentation() -> None:
    section = _known_section()
    if not section:
        pytest.skip(f"{REFERENCE} not found")
    rules = {**known_time.PROFILES, **known_time.TYPES}
    cited = set()
    for name, rule in rules.items():
        mimic = MIMIC_TABLE.findall(rule["reason"])
        assert mimic, f"{name}: the reason names no MIMIC-IV table"
        for table in mimic:
            assert f"`{table}" in section, f"{name}: {table} is not among REFERENCE.md's known-time facts"
            cited.add(table)
        assert rule["known"] in ("latest", known_time.ENCOUNTER_END)
        assert rule["known"] == known_time.ENCOUNTER_END or set(rule["elements"]) <= set(known_time.ELEMENTS)
    # the sources: results, orders, administrations, billed diagnoses and procedures, ED, notes, death
    for table in ("hosp/labevents", "hosp/prescriptions", "hosp/emar", "hosp/diagnoses_icd"):
        assert table in cited
    for table in ("hosp/procedures_icd", "ed/diagnosis", "note/discharge"):
        assert table in cited
    assert "hosp/patients.dod" in known_time._DATA["death"]["reason"]
    assert known_time.PROFILES[PROFILE + "condition"]["known"] == known_time.ENCOUNTER_END
    assert known_time.PROFILES[PROFILE + "procedure"]["known"] == known_time.ENCOUNTER_END


def _python_files() -> list[Path]:
    return [p for top in ("services", "rounds", "events") for p in (ROOT / top).rglob("*.py")]


def test_no_second_copy_of_the_rule_exists() -> None:
    """Only store/known_time.py opens the rule file; no JSON file elsewhere carries its sections; no Python
    module lists three or more of its clinical-time elements as literals (a copied element list), and the
    modules that used to keep their own rule read it from known_time."""
    names = {path for steps in known_time.ELEMENTS.values() for (_, path, *_) in steps}
    names |= set(known_time.ELEMENTS) | {"effectiveDateTime", "performedDateTime", "onsetDateTime"}
    copies = []
    for path in _python_files():
        text = path.read_text()
        if RULE_FILE in text and path.name != "known_time.py":
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.Constant) and node.value == RULE_FILE:
                    copies.append(f"{path}: opens {RULE_FILE}")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Tuple | ast.List | ast.Set):
                found = {e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in names}
                if len(found) >= 3:
                    copies.append(f"{path}:{node.lineno}: lists {sorted(found)}")
    for path in (ROOT / "services").rglob("*.json"):
        if path.name == RULE_FILE:
            continue
        try:
            data = json.loads(path.read_text())
        except ValueError:
            continue
        if isinstance(data, dict) and {"inherit", "inherit_from_referrers"} & set(data):
            copies.append(f"{path}: a second rule file")
    assert not copies, copies
    readers = {
        "services/fhir_api/store/indexing.py": "known_time import",
        "services/fhir_api/store/timing.py": "known_time import",
        "services/fhir_api/store/views.py": "known_time import",
        "services/simulator/scenarios/reader.py": "known_time import known_at",
    }
    for rel, needle in readers.items():
        assert needle in (ROOT / rel).read_text(), f"{rel} does not read the known-time rule"


P = "Patient/p"


def _write_admission(store) -> None:
    shared = Context()
    store.update(shared, "Patient", "p", {"resourceType": "Patient", "id": "p"})
    start = "2180-01-01T00:00:00Z"
    for eid, status, period in (
        ("e", "finished", {"start": start, "end": "2180-01-10T12:00:00Z"}),
        ("open", "in-progress", {"start": start}),
    ):
        body = {"resourceType": "Encounter", "id": eid, "status": status, "class": {"code": "IMP"}}
        store.update(shared, "Encounter", eid, {**body, "subject": {"reference": P}, "period": period})
    for cid, enc in (("c", "e"), ("c-open", "open")):
        store.update(
            shared,
            "Condition",
            cid,
            {
                "resourceType": "Condition",
                "id": cid,
                "meta": {"profile": [PROFILE + "condition"]},
                "subject": {"reference": P},
                "encounter": {"reference": f"Encounter/{enc}"},
                "code": {"coding": [{"system": "urn:icd", "code": "J15.211"}]},
            },
        )
    store.update(
        shared,
        "Procedure",
        "pr",
        {
            "resourceType": "Procedure",
            "id": "pr",
            "status": "completed",
            "meta": {"profile": [PROFILE + "procedure"]},
            "subject": {"reference": P},
            "encounter": {"reference": "Encounter/e"},
            "code": {"text": "ICD"},
            "performedDateTime": "2180-01-02",
        },
    )


def _ids(store, ctx, rtype: str, params: list[tuple[str, str]]) -> tuple[set[str], int | None, set[str]]:
    result = store.search(ctx, SearchRequest(rtype, params, count=50, total="accurate"))
    return {m.id for m in result.matches}, result.total, {i.id for i in result.includes}


def test_billed_codes_are_known_at_the_encounters_end_on_every_path(store) -> None:
    _write_admission(store)
    mid = store.get_session(store.create_session(datetime(2180, 1, 5, tzinfo=UTC)))
    after = store.get_session(store.create_session(datetime(2180, 1, 10, 12, 0, 1, tzinfo=UTC)))
    assert _ids(store, mid, "Condition", [("patient", "p")])[:2] == (set(), 0)
    assert _ids(store, mid, "Procedure", [("patient", "p")])[:2] == (set(), 0)
    assert _ids(store, mid, "Condition", [("code", "J15.211")])[:2] == (set(), 0)
    assert _ids(store, mid, "Encounter", [("_revinclude", "Condition:encounter")])[2] == set()
    assert _ids(store, mid, "Patient", [("_has:Condition:patient:code", "J15.211")])[:2] == (set(), 0)
    assert _ids(store, mid, "Condition", [("encounter.status", "in-progress")])[:2] == (set(), 0)
    everything = store.everything(mid, "p", count=50)
    assert not {m.resource_type for m in everything.matches} & {"Condition", "Procedure"}
    with pytest.raises(Exception) as missing:
        store.read(mid, "Condition", "c")
    assert type(missing.value).__name__ == "NotFound"
    # after discharge the stay's codes are known; an encounter still open never shows its codes to a clock
    assert _ids(store, after, "Condition", [("patient", "p")])[:2] == ({"c"}, 1)
    assert _ids(store, after, "Procedure", [("patient", "p")])[:2] == ({"pr"}, 1)
    assert _ids(store, after, "Encounter", [("_revinclude", "Condition:encounter")])[2] == {"c"}
    # without a clock (the shared record, a session without `now`) everything is there
    assert _ids(store, Context(), "Condition", [("patient", "p")])[0] == {"c", "c-open"}


def test_the_builders_known_time_is_the_stores_clinical_time(store) -> None:
    """reader.known_time (the builder) gives, for every resource, the instant the store hides it until."""
    from sqlalchemy import select

    from services.fhir_api.search.values import to_us
    from services.fhir_api.store import models as m
    from services.simulator.scenarios.reader import known_time as builder_known

    _write_admission(store)
    shared = Context()
    store.update(
        shared,
        "Observation",
        "lab",
        {
            "resourceType": "Observation",
            "id": "lab",
            "status": "final",
            "code": {"text": "creatinine"},
            "meta": {"profile": [PROFILE + "observation-labevents"]},
            "subject": {"reference": P},
            "effectiveDateTime": "2180-01-03T13:15:00Z",
            "issued": "2180-01-03T15:00:00Z",
        },
    )
    bodies = {}
    for rtype in ("Encounter", "Condition", "Procedure", "Observation"):
        for item in store.search(shared, SearchRequest(rtype, [], count=50)).matches:
            bodies[f"{rtype}/{item.id}"] = json.loads(item.raw)
    known = builder_known({k: v for k, v in bodies.items() if k.startswith("Encounter/")})
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(m.resource.c.res_type, m.resource.c.res_id, m.resource.c.clinical_time)
        ).all()
    stored = {f"{t}/{i}": c for t, i, c in rows if f"{t}/{i}" in bodies}
    assert len(stored) == len(bodies) == 6
    for ref, body in bodies.items():
        mine = known(body)
        expected = stored[ref]
        if mine is None:  # never, to a clock
            assert expected is None or expected >= 2**62 - 1, ref
        else:
            assert to_us(mine) == expected, ref
    assert known(bodies["Observation/lab"]) == datetime(2180, 1, 3, 15, tzinfo=UTC)
    assert known(bodies["Condition/c"]) == datetime(2180, 1, 10, 12, 0, 0, 999999, tzinfo=UTC)


def test_the_builder_inherits_through_the_parameters_the_store_reads(store) -> None:
    """A MedicationDispense without times of its own is known with its order, read through `prescription`
    (authorizingPrescription, a list), as the store dates it; a Specimen through `parent` (a list)
    likewise."""
    from sqlalchemy import select

    from services.fhir_api.store import models as m
    from services.fhir_api.store.known_time import known_at

    shared = Context()
    order = {"resourceType": "MedicationRequest", "id": "rx", "status": "active", "intent": "order",
             "subject": {"reference": P}, "medicationCodeableConcept": {"text": "heparin"},
             "authoredOn": "2180-01-02T08:00:00Z"}
    dispense = {"resourceType": "MedicationDispense", "id": "md", "status": "completed",
                "medicationCodeableConcept": {"text": "heparin"}, "subject": {"reference": P},
                "authorizingPrescription": [{"reference": "MedicationRequest/rx"}]}
    parent = {"resourceType": "Specimen", "id": "sp", "subject": {"reference": P},
              "collection": {"collectedDateTime": "2180-01-03T06:00:00Z"}}
    child = {"resourceType": "Specimen", "id": "sp-child", "subject": {"reference": P},
             "parent": [{"reference": "Specimen/sp"}]}
    store.update(shared, "Patient", "p", {"resourceType": "Patient", "id": "p"})
    for body in (order, dispense, parent, child):
        store.update(shared, body["resourceType"], body["id"], body)
    bodies = {f"{b['resourceType']}/{b['id']}": b for b in (order, dispense, parent, child)}
    with store.engine.connect() as conn:
        r = m.resource
        rows = conn.execute(select(r.c.res_type, r.c.res_id, r.c.clinical_time)).all()
    stored = {f"{t}/{i}": c for t, i, c in rows}
    for ref in ("MedicationDispense/md", "Specimen/sp-child"):
        assert stored[ref] is not None, ref
        assert known_at(bodies[ref], bodies.get) == stored[ref], ref
