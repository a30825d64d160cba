"""One patient's record as the scenario builder sees it: the resources read through FHIR, reduced to the
fields
the families compute truth from. Data only (the reader fills it, truth/engine/memory read it).

Every item keeps its FHIR reference, so each fact derived from it can name its source. `known` is when the
item became visible to a session clock, by the FHIR store's own known-time rule (store/known_time.json,
applied by reader.py: a lab is known once issued, a billed diagnosis at its encounter's end)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime

from services.fhir_api.search.values import to_us
from services.fhir_api.store.views import apply
from services.simulator.scenarios.clock import local


@dataclass(frozen=True)
class Lab:
    ref: str  # "Observation/<id>"
    key: str  # vocabulary key ("creatinine")
    code: str  # "system|code" as the record carries it
    value: float
    unit: str | None
    effective: datetime
    known: datetime
    encounter: str | None
    low: float | None = None  # the Observation's own referenceRange (this lab, this patient), when it has one
    high: float | None = None


@dataclass(frozen=True)
class Administration:
    """A dose given (MedicationAdministration, the MAR): what "before we gave that" refers to."""

    ref: str  # "MedicationAdministration/<id>"
    key: str | None  # vocabulary drug key
    name: str
    time: datetime  # effective (when it was given)
    request: str | None  # the MedicationRequest it carried out
    dose: float | None
    dose_unit: str | None
    encounter: str | None


@dataclass(frozen=True)
class Med:
    ref: str  # "MedicationRequest/<id>"
    key: str | None  # vocabulary drug key, None when the drug is not in the vocabulary
    name: str
    route: str | None
    dose: float | None
    dose_unit: str | None
    authored: datetime
    start: datetime | None
    end: datetime | None
    encounter: str | None
    status: str | None = None  # as recorded (the sandbox rewrites it at its clock: store/known_time.json)
    frequency: str | None = None  # the dosage's timing code (MIMIC frequency: "BID", "Q8H"), if recorded

    def active_at(self, now: datetime) -> bool:
        """Known and `active` in the sandbox at `now`: its as-of view's status (an order whose validity has
        not ended is active there), so a count of active orders is what an assistant finds."""
        if self.authored > now:
            return False
        view = {"resourceType": "MedicationRequest", "status": self.status}
        if self.end is not None:
            view["dispenseRequest"] = {"validityPeriod": {"end": self.end.isoformat()}}
        apply(view, to_us(now))
        return view["status"] == "active"


@dataclass(frozen=True)
class Condition:
    ref: str
    key: str  # vocabulary condition key
    code: str
    display: str
    encounter: str | None
    known: datetime | None  # its encounter's end (billed at discharge); None: never, to a clock


@dataclass(frozen=True)
class Encounter:
    ref: str
    start: datetime
    end: datetime | None
    klass: str | None


@dataclass(frozen=True)
class Susceptibility:
    ref: str
    antibiotic: str  # MIMIC name, upper case
    interpretation: str  # S | I | R
    known: datetime


@dataclass(frozen=True)
class Isolate:
    ref: str  # the organism Observation
    organism: str
    test_ref: str | None
    specimen: str | None  # specimen type, e.g. "URINE"
    collected: datetime
    known: datetime  # the latest of its susceptibilities' times (the full report)
    susceptibilities: tuple[Susceptibility, ...]
    encounter: str | None


@dataclass(frozen=True)
class Note:
    ref: str
    known: datetime
    text: str


@dataclass
class Chart:
    patient: str  # "Patient/<id>"
    mrn: str | None
    name: str
    birth_date: date | None
    gender: str | None
    labs: dict[str, list[Lab]] = field(default_factory=dict)  # by vocabulary key, ordered by `known`
    repeats: dict[str, list[Lab]] = field(default_factory=dict)  # the same labs by another method
    meds: list[Med] = field(default_factory=list)
    administrations: list[Administration] = field(default_factory=list)  # by time
    conditions: list[Condition] = field(default_factory=list)
    diagnoses: list[tuple[str, str | None]] = field(default_factory=list)  # every (ICD code, encounter)
    encounters: list[Encounter] = field(default_factory=list)
    isolates: list[Isolate] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    references: dict[str, datetime | None] = field(default_factory=dict)  # every source -> when known

    def encounter_at(self, now: datetime) -> Encounter | None:
        """The admission in progress at `now`, if any."""
        for enc in self.encounters:
            if enc.start <= now and (enc.end is None or now <= enc.end):
                return enc
        return None

    def age_at(self, now: datetime) -> int | None:
        if self.birth_date is None:
            return None
        now = local(now)  # a birthday begins at midnight on the ward
        years = now.year - self.birth_date.year
        return years - ((now.month, now.day) < (self.birth_date.month, self.birth_date.day))
