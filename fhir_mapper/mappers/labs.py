"""ObservationLabevents (one per labevents row) and SpecimenLab (one per specimen_id), as the official
fhir_observation_labevents.sql / fhir_specimen_lab.sql.

labevents is the largest table mapped (124 M rows in full MIMIC-IV), so rows arrive as tuples and every
part shared by many rows is built once and reused as the same object: the code per itemid, the
reference range per (lower, upper, unit), interpretation, priority extension, and the subject, encounter
and specimen references per run of consecutive rows (labs come sorted by patient and specimen).
orjson serialises a shared object exactly as a fresh one, so the output is unchanged.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from fhir_mapper import vocab
from fhir_mapper.context import MapContext
from fhir_mapper.fhir import (
    CS,
    DATA_ABSENT,
    IDENTIFIER,
    INTERPRETATION,
    LABORATORY,
    UNITS,
    compact,
    identifier,
    meta,
    unit_quantity,
)
from fhir_mapper.ids import fhir_id, ref
from fhir_mapper.loinc import crosswalk
from fhir_mapper.values import instant, number

TABLE = "hosp/labevents"
COLUMNS = (  # the tuple layout of a row (every column is still type-checked)
    "labevent_id",
    "subject_id",
    "hadm_id",
    "specimen_id",
    "itemid",
    "charttime",
    "storetime",
    "value",
    "valuenum",
    "valueuom",
    "ref_range_lower",
    "ref_range_upper",
    "flag",
    "priority",
    "comments",
)
LAB_META = meta("observation-labevents")
LAB_IDENTIFIER = f"{IDENTIFIER}observation-labevents"
LAB_CODES = f"{CS}d-labitems"
LAB_PRIORITY = "http://mimic.mit.edu/fhir/mimic/StructureDefinition/lab-priority"
NO_VALUE = {"coding": [{"system": DATA_ABSENT, "code": "unknown"}]}
INTERPRETATIONS = {
    flag: [{"coding": [{"system": INTERPRETATION, "code": code, "display": display}]}]
    for flag, (code, display) in vocab.LAB_INTERPRETATION.items()
}
_LETTER = re.compile(r"[a-zA-Z]")
_COMPARATORS = ("<=", "<", ">=", ">")


def lab_value(value: str | None, valuenum: str) -> tuple[Any, str | None]:
    """(numeric value, comparator) as the official query parses '<0.01', '>=1000', ..."""
    comparator = None
    if value and ("<" in value or ">" in value or "THAN" in value):
        comparator = next((c for c in _COMPARATORS if c in value), None)
        if comparator is None:
            comparator = ">" if "GREATER THAN" in value else "<" if "LESS THAN" in value else None
    if valuenum:
        return number(valuenum), comparator
    if (
        not value
        or value in ("<1>50", "150>")
        or _LETTER.search(value)
        or not value.isascii()
        or not comparator
    ):
        return None, comparator
    try:
        return number(value.split(comparator)[1].strip()), comparator
    except (ValueError, IndexError):
        return None, comparator


def lab_status(comments: str | None) -> str:
    if not comments:
        return "final"
    low = comments.lower()
    return (
        "entered-in-error"
        if "error" in low
        else "corrected"
        if "corrected" in low
        else "cancelled"
        if "cancel" in low
        else "final"
    )


@lru_cache(maxsize=1 << 14)
def reference_range(lower: str, upper: str, unit: str | None) -> list[dict[str, Any]]:
    """referenceRange for one (ref_range_lower, ref_range_upper, unit): a few per itemid."""
    rr: dict[str, Any] = {}
    if lower:
        rr["low"] = unit_quantity(number(lower), unit)
    if upper:
        rr["high"] = unit_quantity(number(upper), unit)
    return [rr]


@lru_cache(maxsize=256)
def priority_extension(priority: str) -> list[dict[str, str]]:
    return [{"url": LAB_PRIORITY, "valueString": priority}]


def lab_code(itemid: str, label: str, loinc: dict[str, str] | None) -> dict[str, Any]:
    """Observation.code of one d_labitems item (MIMIC coding, then LOINC when the crosswalk has it)."""
    coding = [
        {"system": LAB_CODES, "code": itemid, "display": label}
        if label
        else {"system": LAB_CODES, "code": itemid}
    ]
    if loinc:
        coding.append(loinc)
    return {"coding": coding}


def labevent(row: tuple, code: dict[str, Any], subject: dict, encounter: dict | None, specimen: dict) -> dict:
    """One labevents row (COLUMNS order) -> Observation; optional keys added only when present."""
    (
        labevent_id,
        _subject_id,
        _hadm_id,
        _specimen_id,
        _itemid,
        charttime,
        storetime,
        value,
        valuenum,
        valueuom,
        lower,
        upper,
        flag,
        priority,
        comments,
        _line,
    ) = row
    value, comments, unit = value.strip() or None, comments or None, valueuom.strip() or None
    num, comparator = lab_value(value, valuenum)
    obs: dict[str, Any] = {
        "resourceType": "Observation",
        "id": fhir_id("ObservationLabevents", labevent_id),
        "meta": LAB_META,
        "identifier": [{"value": labevent_id, "system": LAB_IDENTIFIER}],
        "status": lab_status(comments),
        "category": LABORATORY,
        "code": code,
        "subject": subject,
        "specimen": specimen,
    }
    if priority:
        obs["extension"] = priority_extension(priority)
    if encounter is not None:
        obs["encounter"] = encounter
    if charttime:
        obs["effectiveDateTime"] = instant(charttime)
    if storetime:
        obs["issued"] = instant(storetime)
    if num is not None:
        if unit is None:
            q = obs["valueQuantity"] = {"value": num}
        else:
            q = obs["valueQuantity"] = {"value": num, "unit": unit, "system": UNITS, "code": unit}
        if comparator:
            q["comparator"] = comparator
    elif value is not None or comments is not None:
        obs["valueString"] = value or comments
    else:
        obs["dataAbsentReason"] = NO_VALUE
    interpretation = INTERPRETATIONS.get(flag)
    if interpretation:
        obs["interpretation"] = interpretation
    if comments:
        obs["note"] = [{"text": comments}]
    if lower or upper:
        obs["referenceRange"] = reference_range(lower, upper, unit)
    return obs


def specimen_lab(specimen_id: int, subject_id: int, charttime: str, fluid: str | None) -> dict[str, Any]:
    return compact(
        {
            "resourceType": "Specimen",
            "id": fhir_id("SpecimenLab", str(specimen_id)),
            "meta": meta("specimen"),
            "identifier": identifier("specimen-lab", str(specimen_id)),
            "type": {"coding": [compact({"code": fluid, "system": f"{CS}lab-fluid"})]},
            "subject": ref("Patient", "Patient", str(subject_id)),
            "collection": compact({"collectedDateTime": instant(charttime)}),
        }
    )


def _max_each(a: list[Any], b: list[Any]) -> list[Any]:
    """SpecimenLab aggregates: MAX(itemid), MAX(subject_id), MAX(charttime)."""
    a[0], a[1], a[2] = max(a[0], b[0]), max(a[1], b[1]), max(a[2], b[2])
    return a


def run(ctx: MapContext) -> None:
    """ObservationLabevents per row; SpecimenLab per specimen_id (MAX itemid/subject/charttime)."""
    items = ctx.lookup("d_labitems")
    loinc = crosswalk("d_labitems")
    codes: dict[str, dict[str, Any]] = {}
    specimens = ctx.groups(_max_each, light=True)
    write = ctx.sink.writer("ObservationLabevents")
    subject_id = hadm_id = specimen_id = None  # the current runs, with their references
    subject = encounter = specimen = maxima = None  # maxima: the current specimen's MAX() values
    for row in ctx.tuples(TABLE, COLUMNS):
        itemid = row[4]
        code = codes.get(itemid)
        if code is None:
            item = items.get(itemid)
            if item is None:
                ctx.reject_line(TABLE, row[-1], f"unknown itemid {itemid} (not in d_labitems)")
                continue
            code = codes[itemid] = lab_code(itemid, item[0], loinc.get(itemid))
        if row[1] != subject_id:
            subject_id = row[1]
            subject = ref("Patient", "Patient", subject_id)
        if row[2] != hadm_id:
            hadm_id = row[2]
            encounter = ref("Encounter", "Encounter", hadm_id) if hadm_id else None
        if row[3] == specimen_id:  # a specimen's labs are consecutive rows: merge before the group-by
            write(labevent(row, code, subject, encounter, specimen))
            item_no, subject_no = int(itemid), int(subject_id)
            if item_no > maxima[0]:
                maxima[0] = item_no
            if subject_no > maxima[1]:
                maxima[1] = subject_no
            if row[5] > maxima[2]:
                maxima[2] = row[5]
            continue
        if maxima is not None:
            specimens.add(int(specimen_id), maxima)
        specimen_id = row[3]
        specimen = {"reference": f"Specimen/{fhir_id('SpecimenLab', specimen_id)}"}
        write(labevent(row, code, subject, encounter, specimen))
        maxima = [int(itemid), int(subject_id), row[5]]
    if maxima is not None:
        specimens.add(int(specimen_id), maxima)
    for key, (itemid, subject_no, charttime) in specimens.items():
        fluid = (items.get(str(itemid)) or (None, None))[1]
        ctx.emit("SpecimenLab", specimen_lab(key, subject_no, charttime, fluid))
