"""Synthetic MIMIC-shaped data (fhir_mapper.synth, every table incl. chartevents, ED and notes) maps with
no special cases: every profile is produced, validates, and references resolve."""

from __future__ import annotations

import base64
import csv
import gzip
from pathlib import Path

import orjson
import pytest

from fhir_mapper.ids import fhir_id
from fhir_mapper.pipeline import run_map
from fhir_mapper.synth.generate import generate
from tests.fhir_mapper.conftest import dangling_references

pytestmark = pytest.mark.slow  # whole pipelines, subprocesses or real services: not in the fast lane

ALL_PROFILES = [
    "Organization",
    "Location",
    "Patient",
    "Encounter",
    "EncounterICU",
    "EncounterED",
    "Condition",
    "ConditionED",
    "Procedure",
    "ProcedureICU",
    "ProcedureED",
    "ObservationLabevents",
    "SpecimenLab",
    "Specimen",
    "ObservationMicroTest",
    "ObservationMicroOrg",
    "ObservationMicroSusc",
    "ObservationChartevents",
    "ObservationDatetimeevents",
    "ObservationOutputevents",
    "ObservationED",
    "ObservationVitalSignsED",
    "Medication",
    "MedicationMix",
    "MedicationRequest",
    "MedicationDispense",
    "MedicationDispenseED",
    "MedicationAdministration",
    "MedicationAdministrationICU",
    "MedicationStatementED",
    "DocumentReference",
]


@pytest.fixture(scope="module")
def synth_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict, int]:
    mimic = tmp_path_factory.mktemp("synth_mimic")
    generate(mimic, 25, seed=7)
    out = tmp_path_factory.mktemp("synth_fhir")
    summary, code = run_map(mimic, out, workers=2, validate_stride=1)
    return mimic, out, summary, code


def _csv(mimic: Path, table: str) -> list[dict[str, str]]:
    with gzip.open(mimic / f"{table}.csv.gz", "rt", newline="") as handle:
        return list(csv.DictReader(handle))


def test_every_profile_is_produced_and_validates(synth_run):
    _, _, summary, code = synth_run
    produced = {name.removeprefix("Mimic").removesuffix(".ndjson") for name in summary["files"]}
    assert set(ALL_PROFILES) <= produced
    assert summary["validation"]["failures"] == 0, summary["validation"]["listed"][:3]
    assert sum(summary["validation"]["validated"].values()) == summary["total_resources"]
    assert summary["rejected_rows"] == 0 and summary["missing_tables"] == [] and code == 0


def test_every_reference_resolves(synth_run):
    _, out, summary, _ = synth_run
    assert dangling_references(out, summary["files"]) == []


def test_counts_follow_the_source_rows(synth_run):
    mimic, _, summary, _ = synth_run
    count = {
        name.removeprefix("Mimic").removesuffix(".ndjson"): v["count"] for name, v in summary["files"].items()
    }
    vitals, triage = _csv(mimic, "ed/vitalsign"), _csv(mimic, "ed/triage")
    assert count["ObservationVitalSignsED"] == 5 * (len(vitals) + len(triage))
    assert count["ObservationED"] == 2 * len(vitals) + 3 * len(triage)
    assert count["ProcedureED"] == len(vitals) + len(triage)
    assert count["ObservationChartevents"] == sum(1 for r in _csv(mimic, "icu/chartevents") if r["value"])
    assert count["DocumentReference"] == len(_csv(mimic, "note/discharge")) + len(
        _csv(mimic, "note/radiology")
    )


def test_notes_are_document_references_linked_to_patient_and_encounter(synth_run):
    mimic, out, _, _ = synth_run
    note = _csv(mimic, "note/discharge")[0]
    docs = {
        d["id"]: d
        for d in map(orjson.loads, (out / "MimicDocumentReference.ndjson").read_bytes().splitlines())
    }
    doc = docs[fhir_id("DocumentReference", note["note_id"])]
    assert doc["subject"]["reference"] == f"Patient/{fhir_id('Patient', note['subject_id'])}"
    assert doc["context"]["encounter"][0]["reference"] == f"Encounter/{fhir_id('Encounter', note['hadm_id'])}"
    assert base64.b64decode(doc["content"][0]["attachment"]["data"]).decode() == note["text"]
    assert doc["type"]["coding"][0]["code"] == "18842-5"


def test_chartevent_vital_signs_carry_loinc_beside_the_mimic_code(synth_run):
    mimic, out, _, _ = synth_run
    heart_rates = [r for r in _csv(mimic, "icu/chartevents") if r["itemid"] == "220045"]
    assert heart_rates
    row = heart_rates[0]
    key = f"{row['stay_id']}-{row['charttime']}-{row['itemid']}-{row['value']}"
    wanted = fhir_id("ObservationChartevents", key)
    for line in (out / "MimicObservationChartevents.ndjson").read_bytes().splitlines():
        obs = orjson.loads(line)
        if obs["id"] == wanted:
            codings = obs["code"]["coding"]
            assert codings[0]["code"] == "220045" and codings[0]["system"].endswith("chartevents-d-items")
            assert codings[1] == {"system": "http://loinc.org", "code": "8867-4", "display": "Heart rate"}
            assert obs["encounter"]["reference"] == f"Encounter/{fhir_id('EncounterICU', row['stay_id'])}"
            break
    else:
        pytest.fail("heart rate observation not found")
