"""The real MIMIC-IV demo maps to the official MIMIC-IV on FHIR counts, validates, and is reported."""

from __future__ import annotations

import orjson

# Official demo counts (REFERENCE.md §2) for the profiles whose source tables are in this demo copy.
OFFICIAL = {
    "Patient": 100,
    "Encounter": 275,
    "EncounterICU": 140,
    "Location": 31,
    "Organization": 1,
    "Condition": 4506,
    "Procedure": 722,
    "ProcedureICU": 1468,
    "ObservationLabevents": 107727,
    "SpecimenLab": 11122,
    "Specimen": 1336,
    "ObservationMicroTest": 1893,
    "ObservationMicroOrg": 338,
    "ObservationMicroSusc": 1036,
    "ObservationDatetimeevents": 15280,
    "ObservationOutputevents": 9362,
    "MedicationAdministrationICU": 20404,
    "Medication": 1480,
    "MedicationMix": 314,
    "MedicationDispense": 14293,
    # The official SQL run on this demo (v2.2) gives the published MIMIC-IV on FHIR demo counts: 17,552
    # requests
    # (15,225 from prescriptions + 2,327 poe orders seen in eMAR without a prescription) and 36,131
    # administrations. The repository's older row-count test says 15,225 / 35,926 (see test below).
    "MedicationRequest": 17552,
    "MedicationAdministration": 36131,
}


def test_every_file_has_the_official_count(demo_run):
    out, summary, _ = demo_run
    for profile, expected in OFFICIAL.items():
        name = f"Mimic{profile}.ndjson"
        assert summary["files"][name]["count"] == expected, name
        assert sum(1 for _ in (out / name).open("rb")) == expected, name


def test_ids_are_unique_per_file(demo_run):
    out, summary, _ = demo_run
    for name in summary["files"]:
        ids = [orjson.loads(line)["id"] for line in (out / name).read_bytes().splitlines()]
        assert len(ids) == len(set(ids)), name


def test_demo_validates_and_nothing_is_rejected(demo_run):
    out, summary, code = demo_run
    validation = summary["validation"]
    assert sum(validation["validated"].values()) > 12_000
    assert validation["failures"] == 0, validation["listed"][:3]
    assert summary["rejected_rows"] == 0 and summary["skipped_tables"] == {}
    assert code == 0
    assert "icu/chartevents" in summary["missing_tables"]  # absent from this copy of the demo, reported
    assert summary["rows_read"]["hosp/labevents"] == 107727
    assert orjson.loads((out / "summary.json").read_bytes())["total_resources"] == summary["total_resources"]


def test_medication_requests_split_as_the_official_sql(demo_run):
    out, _, _ = demo_run
    requests = [
        orjson.loads(line) for line in (out / "MimicMedicationRequest.ndjson").read_bytes().splitlines()
    ]
    from_prescriptions = [r for r in requests if "medicationReference" in r]
    from_poe = [r for r in requests if "medicationCodeableConcept" in r]
    assert len(from_prescriptions) == 15225  # the official repository test count
    assert len(from_poe) == 2327  # the published release's extra requests
