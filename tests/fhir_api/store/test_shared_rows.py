"""Parameters answered by other parameters' index rows (registry.stored_as): same answers, fewer rows."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from services.fhir_api.search.keys import param_key
from services.fhir_api.search.registry import stored_as
from services.fhir_api.store import models as m
from services.fhir_api.store.interface import Context, SearchRequest

SHARED = Context()


def test_derived_from_the_parameter_paths() -> None:
    assert stored_as("Observation", "patient") == (("subject", "Patient"),)
    assert stored_as("Encounter", "practitioner") == (("participant", "Practitioner"),)
    assert set(stored_as("Observation", "combo-code")) == {("code", None), ("component-code", None)}
    assert set(stored_as("Observation", "combo-value-quantity")) == {
        ("value-quantity", None),
        ("component-value-quantity", None),
    }
    assert stored_as("Observation", "subject") == (("subject", None),)
    assert stored_as("Observation", "code") == (("code", None),)
    assert stored_as("Patient", "general-practitioner") == (("general-practitioner", None),)


@pytest.fixture
def data(store):
    patient = store.create(SHARED, {"resourceType": "Patient"})
    group = store.create(SHARED, {"resourceType": "Group", "type": "person", "actual": True})
    ident = {"system": "urn:mrn", "value": "M1"}
    on_patient = store.create(
        SHARED,
        {
            "resourceType": "Observation",
            "status": "final",
            "code": {"coding": [{"system": "urn:lab", "code": "bp"}]},
            "component": [
                {
                    "code": {"coding": [{"system": "urn:lab", "code": "sys"}]},
                    "valueQuantity": {"value": 120, "system": "http://unitsofmeasure.org", "code": "mm[Hg]"},
                }
            ],
            "subject": {"reference": f"Patient/{patient.id}", "identifier": ident},
        },
    )
    on_group = store.create(
        SHARED,
        {
            "resourceType": "Observation",
            "status": "final",
            "code": {"coding": [{"system": "urn:lab", "code": "sys"}]},
            "valueQuantity": {"value": 130, "system": "http://unitsofmeasure.org", "code": "mm[Hg]"},
            "subject": {"reference": f"Group/{group.id}", "identifier": ident},
        },
    )
    return patient, group, on_patient, on_group


def ids(store, rtype: str, *params: tuple[str, str]) -> set[str]:
    return {r.id for r in store.search(SHARED, SearchRequest(rtype, list(params))).matches}


def test_restricted_reference_answers_only_its_target_type(store, data) -> None:
    patient, group, on_patient, on_group = data
    assert ids(store, "Observation", ("patient", patient.id)) == {on_patient.id}
    assert ids(store, "Observation", ("patient", group.id)) == set()
    assert ids(store, "Observation", ("subject", group.id)) == {on_group.id}
    assert ids(store, "Observation", ("patient:missing", "false")) == {on_patient.id}
    assert ids(store, "Observation", ("patient:missing", "true")) == {on_group.id}
    # the :identifier rows keep the parameter's own filter: a Group subject is no patient
    assert ids(store, "Observation", ("patient:identifier", "urn:mrn|M1")) == {on_patient.id}
    assert ids(store, "Observation", ("subject:identifier", "urn:mrn|M1")) == {on_patient.id, on_group.id}
    assert ids(store, "Observation", ("patient.identifier", "x")) == set()  # chain through the alias
    assert ids(store, "Patient", ("_has:Observation:patient:status", "final")) == {patient.id}
    assert ids(store, "Group", ("_has:Observation:patient:status", "final")) == set()


def test_union_answers_both_parts(store, data) -> None:
    _, _, on_patient, on_group = data
    assert ids(store, "Observation", ("code", "sys")) == {on_group.id}
    assert ids(store, "Observation", ("component-code", "sys")) == {on_patient.id}
    assert ids(store, "Observation", ("combo-code", "sys")) == {on_patient.id, on_group.id}
    assert ids(store, "Observation", ("combo-code", "urn:lab|bp")) == {on_patient.id}
    assert ids(store, "Observation", ("combo-value-quantity", "gt125")) == {on_group.id}
    assert ids(store, "Observation", ("combo-value-quantity", "lt125")) == {on_patient.id}
    assert ids(store, "Observation", ("combo-code:not", "bp")) == {on_group.id}


def test_includes_through_the_alias(store, data) -> None:
    patient, group, on_patient, _ = data
    result = store.search(
        SHARED, SearchRequest("Observation", [("status", "final"), ("_include", "Observation:patient")])
    )
    assert {r.id for r in result.includes} == {patient.id}
    result = store.search(
        SHARED, SearchRequest("Patient", [("_id", patient.id), ("_revinclude", "Observation:patient")])
    )
    assert {r.id for r in result.includes} == {on_patient.id}
    result = store.search(
        SHARED, SearchRequest("Group", [("_id", group.id), ("_revinclude", "Observation:patient")])
    )
    assert result.includes == []


def test_repeated_rows_are_not_written(store, data) -> None:
    wanted = ("subject", "code", "component-code", "value-quantity", "patient:identifier")
    repeated = ("patient", "combo-code", "combo-value-quantity")
    names = {param_key("Observation", n): n for n in wanted + repeated}
    with store.engine.connect() as conn:
        keys = set(conn.execute(select(m.reference.c.param_key).distinct()).scalars())
        keys |= set(conn.execute(select(m.token.c.param_key).distinct()).scalars())
        keys |= set(conn.execute(select(m.quantity.c.param_key).distinct()).scalars())
        subject = m.reference.c.param_key == param_key("Observation", "subject")
        subjects = conn.execute(select(func.count()).where(subject)).scalar_one()
    params = {names.get(k) for k in keys}
    assert set(wanted) <= params
    assert not set(repeated) & params
    assert subjects == 2


def test_everything_reads_the_compartment_off_the_reference_rows(store, data) -> None:
    patient, group, on_patient, on_group = data
    other = store.create(SHARED, {"resourceType": "Patient"})
    linked = store.create(
        SHARED,
        {
            "resourceType": "Patient",
            "link": [{"other": {"reference": f"Patient/{patient.id}"}, "type": "seealso"}],
        },
    )
    performed = store.create(  # in the compartment through `performer`, not `subject`
        SHARED,
        {
            "resourceType": "Observation",
            "status": "final",
            "code": {"text": "x"},
            "subject": {"reference": f"Group/{group.id}"},
            "performer": [{"reference": f"Patient/{patient.id}"}],
        },
    )
    given = store.create(
        SHARED,
        {
            "resourceType": "MedicationAdministration",
            "status": "completed",
            "medicationCodeableConcept": {"text": "x"},
            "subject": {"reference": f"Patient/{patient.id}"},
            "effectiveDateTime": "2150-01-01",
        },
    )
    store.create(
        SHARED,
        {
            "resourceType": "Encounter",
            "status": "finished",
            "class": {"code": "AMB"},
            "subject": {"reference": f"Patient/{other.id}"},
        },
    )
    result = store.everything(SHARED, patient.id, count=100, total="accurate")
    assert [r.id for r in result.matches][0] == patient.id
    assert {r.id for r in result.matches} == {patient.id, on_patient.id, performed.id, given.id, linked.id}
    assert result.total == 5
    assert {r.id for r in store.everything(SHARED, patient.id, types=["Observation"], count=100).matches} == {
        on_patient.id,
        performed.id,
    }
    assert on_group.id not in {r.id for r in store.everything(SHARED, other.id, count=100).matches}


def test_a_malformed_reference_gives_no_row_rather_than_an_error() -> None:
    from services.fhir_api.search.extract import index_tuples, interpreted_index_tuples

    obs = {
        "resourceType": "Observation",
        "status": "final",
        "subject": {"reference": 5},
        "code": {"text": "x"},
    }
    assert index_tuples(obs)["reference"] == [] == interpreted_index_tuples(obs)["reference"]
    assert index_tuples(obs)["token"] == interpreted_index_tuples(obs)["token"] != []
