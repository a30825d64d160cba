"""The mapper jobs: which tables each reads and which `Mimic<Profile>.ndjson` files it writes.

A job is the unit of parallelism (`--workers`): its tables are read once and its profiles are its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fhir_mapper.mappers import clinical, core, ed, labs, medication, micro, notes, observations

if TYPE_CHECKING:
    from fhir_mapper.context import MapContext


@dataclass(frozen=True)
class Job:
    name: str
    run: Callable[[MapContext], None]
    required: tuple[str, ...]  # without these the job is skipped (reported as missing tables)
    optional: tuple[str, ...] = ()
    profiles: tuple[str, ...] = ()

    @property
    def tables(self) -> tuple[str, ...]:
        return self.required + self.optional


_JOBS = [
    Job(
        "core",
        core.run,
        ("hosp/patients", "hosp/transfers", "hosp/admissions"),
        ("hosp/hcpcsevents", "hosp/services", "icu/icustays", "ed/edstays"),
        ("Organization", "Location", "Patient", "Encounter", "EncounterICU"),
    ),
    Job(
        "labevents",
        labs.run,
        ("hosp/labevents", "hosp/d_labitems"),
        (),
        ("ObservationLabevents", "SpecimenLab"),
    ),
    *(
        Job(name, observations.item_events_job(name), (rule.table, "icu/d_items"), (), (rule.profile,))
        for name, rule in observations.ITEM_EVENTS.items()
    ),
    *(
        Job(name, clinical.icd_job(name), (rule.table,), (rule.titles,), (rule.profile,))
        for name, rule in clinical.ICD_TABLES.items()
    ),
    *(
        Job(name, clinical.icu_items_job(name), (table, "icu/d_items"), (), (profile,))
        for name, (table, profile, _) in clinical.ICU_ITEM_TABLES.items()
    ),
    Job(
        "microbiology",
        micro.run,
        ("hosp/microbiologyevents",),
        (),
        ("Specimen", "ObservationMicroTest", "ObservationMicroOrg", "ObservationMicroSusc"),
    ),
    Job(
        "medication",
        medication.run,
        ("hosp/prescriptions", "hosp/pharmacy"),
        ("hosp/emar", "hosp/emar_detail", "hosp/poe"),
        (
            "Medication",
            "MedicationMix",
            "MedicationRequest",
            "MedicationDispense",
            "MedicationAdministration",
        ),
    ),
    Job(
        "ed",
        ed.run,
        ("ed/edstays", "hosp/patients"),
        ("ed/triage", "ed/vitalsign", "ed/pyxis", "ed/medrecon"),
        (
            "EncounterED",
            "ProcedureED",
            "ObservationED",
            "ObservationVitalSignsED",
            "MedicationDispenseED",
            "MedicationStatementED",
        ),
    ),
    Job("notes", notes.run, (), tuple(notes.NOTE_KINDS), (notes.PROFILE,)),
]
JOBS: dict[str, Job] = {job.name: job for job in _JOBS}
