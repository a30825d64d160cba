"""In-memory record of one synthetic patient, kept only while that patient's rows are written."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime


@dataclass
class Stay:
    """An ICU stay (icustays) or an ED visit (edstays)."""

    stay_id: int
    intime: datetime
    outtime: datetime
    careunit: str = ""


@dataclass
class Admission:
    hadm_id: int
    scenario_key: str
    scenario: dict
    admittime: datetime
    dischtime: datetime
    admission_type: str
    admission_location: str
    discharge_location: str
    icd_version: int
    deathtime: datetime | None = None
    targets_jitter: float = 1.0  # scales the scenario's presenting lab values for this admission
    ed: Stay | None = None
    icu: list[Stay] = field(default_factory=list)
    ward_segments: list[tuple[str, datetime, datetime]] = field(default_factory=list)  # (careunit, in, out)
    diagnoses: list[tuple[str, int, str]] = field(default_factory=list)  # (icd_code, version, title)
    labs_first: dict[int, tuple[str, str, str]] = field(default_factory=dict)  # itemid -> value, unit, flag
    labs_last: dict[int, tuple[str, str, str]] = field(default_factory=dict)
    micro_findings: list[str] = field(default_factory=list)
    presenting_vitals: dict[str, float] = field(default_factory=dict)  # ED triage values
    repletions: list[tuple[datetime, str]] = field(default_factory=list)  # (result stored, drug key)
    discharge_meds: list[str] = field(default_factory=list)
    held_meds: list[str] = field(default_factory=list)  # home drugs stopped during this admission
    imaging_impressions: list[str] = field(default_factory=list)

    @property
    def los_days(self) -> float:
        return (self.dischtime - self.admittime).total_seconds() / 86400


@dataclass
class Patient:
    subject_id: int
    index: int
    gender: str
    anchor_age: int
    anchor_year: int
    anchor_year_group: str
    race: str
    insurance: str
    language: str
    marital_status: str
    comorbidities: list[str]
    weight_kg: float
    height_cm: float
    baseline: dict[int, float]  # lab itemid -> this patient's usual value
    admissions: list[Admission] = field(default_factory=list)
    ed_only: list[Stay] = field(default_factory=list)
    dod: date | None = None

    def age_at(self, moment: datetime) -> int:
        return self.anchor_age + moment.year - self.anchor_year
