"""Small builders for the FHIR element shapes the official mapping repeats (codings, quantities,
meta.profile, references), with the official system/identifier URLs in one place."""

from __future__ import annotations

from functools import cache
from typing import Any

MIMIC = "http://mimic.mit.edu/fhir/mimic"
CS = f"{MIMIC}/CodeSystem/mimic-"
IDENTIFIER = f"{MIMIC}/identifier/"
PROFILE = f"{MIMIC}/StructureDefinition/mimic-"
UNITS = f"{CS}units"
UCUM = "http://unitsofmeasure.org"
LOINC = "http://loinc.org"
OBS_CATEGORY = "http://terminology.hl7.org/CodeSystem/observation-category"
DATA_ABSENT = "http://terminology.hl7.org/CodeSystem/data-absent-reason"
SNOMED = "http://snomed.info/sct"
INTERPRETATION = "http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation"


def compact(d: dict[str, Any]) -> dict[str, Any]:
    """Drop None and empty-dict values (jsonb_strip_nulls, plus no empty objects)."""
    return {k: v for k, v in d.items() if v is not None and (v or v.__class__ is not dict)}


@cache
def meta(profile: str) -> dict[str, Any]:
    """meta.profile of one official profile: one shared object per profile (resources are only serialised,
    never mutated after they are built)."""
    return {"profile": [f"{PROFILE}{profile}"]}


def coding(system: str, code: Any, display: str | None = None) -> dict[str, Any]:
    return compact({"system": system, "code": code, "display": display})


def concept(system: str, code: Any, display: str | None = None) -> dict[str, Any] | None:
    """A CodeableConcept with one coding, or None when there is no code."""
    if code is None:
        return None
    return {"coding": [coding(system, code, display)]}


def identifier(kind: str, value: str, **extra: Any) -> list[dict[str, Any]]:
    return [{"value": value, "system": f"{IDENTIFIER}{kind}", **extra}]


def quantity(value: Any, unit: str | None, system: str = UNITS, code: str | None = None, **extra: Any):
    """valueQuantity as the official mapping writes it: mimic-units system, code = unit."""
    if value is None:
        return None
    if unit is None:
        return compact({"value": value, **extra})
    return compact({"value": value, "unit": unit, "system": system, "code": code or unit, **extra})


def unit_quantity(value: Any, unit: str | None) -> dict[str, Any]:
    """A Quantity in the mimic-units system (labs and ICU events): the unit is also the code."""
    if unit is None:
        return {"value": value}
    return {"value": value, "unit": unit, "system": UNITS, "code": unit}


def category(system: str, code: str | None, display: str | None = None) -> list[dict[str, Any]] | None:
    c = concept(system, code, display)
    return [c] if c else None


LABORATORY = category(OBS_CATEGORY, "laboratory", "Laboratory")
UNKNOWN_ABSENT = {"coding": [{"system": DATA_ABSENT, "code": "unknown", "display": "Unknown"}]}


def period(start: str | None, end: str | None) -> dict[str, str] | None:
    return compact({"start": start, "end": end}) or None
