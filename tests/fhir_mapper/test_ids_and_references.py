"""Ids and references reproduce the official recipe, recomputed by hand from CSV rows of the demo."""

from __future__ import annotations

import csv
import gzip
import uuid
from pathlib import Path

import orjson

from fhir_mapper.ids import fhir_id
from tests.fhir_mapper.conftest import dangling_references

ROOT = uuid.uuid5(uuid.NAMESPACE_OID, "MIMIC-IV")


def official(name: str, key: str) -> str:
    return str(uuid.uuid5(uuid.uuid5(ROOT, name), key))


def first_rows(demo: Path, table: str, n: int = 3) -> list[dict[str, str]]:
    with gzip.open(demo / f"{table}.csv.gz", "rt", newline="") as handle:
        reader = csv.DictReader(handle)
        return [next(reader) for _ in range(n)]


def by_id(out: Path, profile: str) -> dict[str, dict]:
    return {r["id"]: r for r in map(orjson.loads, (out / f"Mimic{profile}.ndjson").read_bytes().splitlines())}


def test_published_examples_and_fast_path_equal_uuid5():
    assert official("Patient", "10000032") == "0a8eebfd-a352-522e-89f0-1d4a13abdebc"
    assert official("Organization", "http://hl7.org/fhir/sid/us-npi/1194052720") == (
        "ee172322-118b-5716-abbc-18e4c5437e15"
    )
    for name, key in [
        ("Patient", "10000032"),
        ("ObservationChartevents", "3-2180-01-01 00:00:00-220045-80"),
        ("MedicationPrescriptions", "Heparin--HEPA5I--63323026201"),
        ("Condition", ""),
    ]:
        assert fhir_id(name, key) == official(name, key)


def test_labevent_ids_and_references_from_csv(demo_run, demo_dir):
    out, _, _ = demo_run
    labs = by_id(out, "ObservationLabevents")
    specimens = by_id(out, "SpecimenLab")
    patients = by_id(out, "Patient")
    for row in first_rows(demo_dir, "hosp/labevents"):
        obs = labs[official("ObservationLabevents", row["labevent_id"])]
        assert obs["subject"]["reference"] == f"Patient/{official('Patient', row['subject_id'])}"
        assert obs["encounter"]["reference"] == f"Encounter/{official('Encounter', row['hadm_id'])}"
        assert obs["specimen"]["reference"] == f"Specimen/{official('SpecimenLab', row['specimen_id'])}"
        assert obs["code"]["coding"][0] == {
            "system": "http://mimic.mit.edu/fhir/mimic/CodeSystem/mimic-d-labitems",
            "code": row["itemid"],
            "display": obs["code"]["coding"][0]["display"],
        }
        assert obs["valueQuantity"]["value"] == float(row["valuenum"])
        assert official("SpecimenLab", row["specimen_id"]) in specimens
        assert official("Patient", row["subject_id"]) in patients


def test_condition_procedure_icu_and_encounter_keys(demo_run, demo_dir):
    out, _, _ = demo_run
    conditions = by_id(out, "Condition")
    for row in first_rows(demo_dir, "hosp/diagnoses_icd"):
        cond = conditions[official("Condition", f"{row['hadm_id']}-{row['seq_num']}-{row['icd_code']}")]
        assert cond["encounter"]["reference"] == f"Encounter/{official('Encounter', row['hadm_id'])}"
        assert cond["code"]["coding"][0]["code"] == row["icd_code"].strip()
        assert cond["code"]["coding"][0]["system"].endswith(f"diagnosis-icd{row['icd_version']}")
    procedures = by_id(out, "ProcedureICU")
    for row in first_rows(demo_dir, "icu/procedureevents"):
        proc = procedures[official("ProcedureICU", f"{row['stay_id']}-{row['orderid']}-{row['itemid']}")]
        assert proc["encounter"]["reference"] == f"Encounter/{official('EncounterICU', row['stay_id'])}"
    stays = by_id(out, "EncounterICU")
    encounters = by_id(out, "Encounter")
    for row in first_rows(demo_dir, "icu/icustays"):
        stay = stays[official("EncounterICU", row["stay_id"])]
        parent = stay["partOf"]["reference"].split("/")[1]
        assert parent == official("Encounter", row["hadm_id"]) and parent in encounters
    outputs = by_id(out, "ObservationOutputevents")
    for row in first_rows(demo_dir, "icu/outputevents"):
        assert (
            official("ObservationOutputevents", f"{row['stay_id']}-{row['charttime']}-{row['itemid']}")
            in outputs
        )


def test_patient_demographics_follow_the_official_rules(demo_run, demo_dir):
    out, _, _ = demo_run
    patients = by_id(out, "Patient")
    patient = patients["0a8eebfd-a352-522e-89f0-1d4a13abdebc"]  # subject 10000032
    assert patient["name"] == [{"use": "official", "family": "Patient_10000032"}]
    assert patient["identifier"][0]["value"] == "10000032"
    assert patient["gender"] == "female" and patient["deceasedDateTime"] == "2180-09-09"
    # birthDate = first transfer intime - anchor_age (52) years
    assert patient["birthDate"] == "2128-05-06"
    assert patient["managingOrganization"]["reference"] == "Organization/ee172322-118b-5716-abbc-18e4c5437e15"


def test_every_reference_in_the_demo_resolves(demo_run):
    out, summary, _ = demo_run
    assert dangling_references(out, summary["files"]) == []
