"""Observations from MIMIC item dictionaries: labevents (+ SpecimenLab) and the ICU event tables
(chartevents, datetimeevents, outputevents), which share one generic builder driven by `ITEM_EVENTS`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
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
)
from fhir_mapper.ids import fhir_id, ref
from fhir_mapper.loinc import crosswalk
from fhir_mapper.values import instant, number, strip

_LETTER = re.compile(r"[a-zA-Z]")
_COMPARATORS = ("<=", "<", ">=", ">")


def _lab_value(value: str | None, valuenum: str) -> tuple[Any, str | None]:
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


def _lab_status(comments: str | None) -> str:
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


LAB_META = meta("observation-labevents")
LAB_IDENTIFIER = f"{IDENTIFIER}observation-labevents"
LAB_CODES = f"{CS}d-labitems"
LAB_PRIORITY = "http://mimic.mit.edu/fhir/mimic/StructureDefinition/lab-priority"
NO_VALUE = {"coding": [{"system": DATA_ABSENT, "code": "unknown"}]}


def _unit_quantity(value: Any, unit: str | None) -> dict[str, Any]:
    if unit is None:
        return {"value": value}
    return {"value": value, "unit": unit, "system": UNITS, "code": unit}


_last_specimen = ["", ""]  # (specimen_id, reference): a specimen's labs are mostly consecutive rows


def _specimen_reference(specimen_id: str) -> str:
    if specimen_id != _last_specimen[0]:
        _last_specimen[0], _last_specimen[1] = specimen_id, f"Specimen/{fhir_id('SpecimenLab', specimen_id)}"
    return _last_specimen[1]


def labevent(row: dict[str, str], label: str, loinc: dict[str, str] | None) -> dict[str, Any]:
    """Hot path (124 M rows in full MIMIC): plain dict building, optional keys added only when present."""
    value, comments, unit = strip(row["value"]), row["comments"] or None, row["valueuom"].strip() or None
    num, comparator = _lab_value(value, row["valuenum"])
    coding = [
        {"system": LAB_CODES, "code": row["itemid"], "display": label}
        if label
        else {"system": LAB_CODES, "code": row["itemid"]}
    ]
    if loinc:
        coding.append(loinc)
    obs: dict[str, Any] = {
        "resourceType": "Observation",
        "id": fhir_id("ObservationLabevents", row["labevent_id"]),
        "meta": LAB_META,
        "identifier": [{"value": row["labevent_id"], "system": LAB_IDENTIFIER}],
        "status": _lab_status(comments),
        "category": LABORATORY,
        "code": {"coding": coding},
        "subject": ref("Patient", "Patient", row["subject_id"]),
        "specimen": {"reference": _specimen_reference(row["specimen_id"])},
    }
    if row["priority"]:
        obs["extension"] = [{"url": LAB_PRIORITY, "valueString": row["priority"]}]
    if row["hadm_id"]:
        obs["encounter"] = ref("Encounter", "Encounter", row["hadm_id"])
    if row["charttime"]:
        obs["effectiveDateTime"] = instant(row["charttime"])
    if row["storetime"]:
        obs["issued"] = instant(row["storetime"])
    if num is not None:
        q = obs["valueQuantity"] = _unit_quantity(num, unit)
        if comparator:
            q["comparator"] = comparator
    elif value is not None or comments is not None:
        obs["valueString"] = value or comments
    else:
        obs["dataAbsentReason"] = NO_VALUE
    flag = vocab.LAB_INTERPRETATION.get(row["flag"])
    if flag:
        obs["interpretation"] = [
            {"coding": [{"system": INTERPRETATION, "code": flag[0], "display": flag[1]}]}
        ]
    if comments:
        obs["note"] = [{"text": comments}]
    if row["ref_range_lower"] or row["ref_range_upper"]:
        rr = obs["referenceRange"] = [{}]
        if row["ref_range_lower"]:
            rr[0]["low"] = _unit_quantity(number(row["ref_range_lower"]), unit)
        if row["ref_range_upper"]:
            rr[0]["high"] = _unit_quantity(number(row["ref_range_upper"]), unit)
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


def run_labevents(ctx: MapContext) -> None:
    """ObservationLabevents per row; SpecimenLab per specimen_id (MAX itemid/subject/charttime)."""
    items = ctx.lookup("d_labitems")
    loinc = crosswalk("d_labitems")
    specimens = ctx.groups(_max_each, light=True)
    emit = ctx.emit
    run_key, run = None, None  # the current run of consecutive rows of one specimen, merged before add
    for row in ctx.rows("hosp/labevents"):
        itemid = row["itemid"]
        item = items.get(itemid)
        if item is None:
            ctx.reject("hosp/labevents", row, f"unknown itemid {itemid} (not in d_labitems)")
            continue
        emit("ObservationLabevents", labevent(row, item[0], loinc.get(itemid)))
        key, values = int(row["specimen_id"]), [int(itemid), int(row["subject_id"]), row["charttime"]]
        if key == run_key:
            _max_each(run, values)
            continue
        if run is not None:
            specimens.add(run_key, run)
        run_key, run = key, values
    if run is not None:
        specimens.add(run_key, run)
    for key, (itemid, subject, charttime) in specimens.items():
        fluid = (items.get(str(itemid)) or (None, None))[1]
        ctx.emit("SpecimenLab", specimen_lab(key, subject, charttime, fluid))


def _max_each(a: list[Any], b: list[Any]) -> list[Any]:
    """SpecimenLab aggregates: MAX(itemid), MAX(subject_id), MAX(charttime)."""
    a[0], a[1], a[2] = max(a[0], b[0]), max(a[1], b[1]), max(a[2], b[2])
    return a


@dataclass(frozen=True)
class ItemEvents:
    """One ICU event table whose rows become Observations coded by d_items."""

    profile: str
    table: str
    key: tuple[str, ...]  # natural key columns, joined with '-'
    code_system: str
    value: str  # 'numeric-or-text' | 'datetime' | 'quantity'
    reference_range: bool = False
    require_value: bool = False
    exclude: frozenset[tuple[str, str]] = frozenset()  # (stay_id, charttime) the official query leaves out


ITEM_EVENTS = {
    "chartevents": ItemEvents(
        "ObservationChartevents",
        "icu/chartevents",
        ("stay_id", "charttime", "itemid", "value"),
        "chartevents-d-items",
        "numeric-or-text",
        reference_range=True,
        require_value=True,
        exclude=frozenset({("34934165", "2151-10-03 05:14:00")}),  # duplicated rows in full MIMIC-IV
    ),
    "datetimeevents": ItemEvents(
        "ObservationDatetimeevents",
        "icu/datetimeevents",
        ("stay_id", "charttime", "itemid"),
        "d-items",
        "datetime",
    ),
    "outputevents": ItemEvents(
        "ObservationOutputevents",
        "icu/outputevents",
        ("stay_id", "charttime", "itemid"),
        "d-items",
        "quantity",
    ),
}


def item_parts(rule: ItemEvents, itemid: str, item: dict[str, str], loinc: dict | None) -> tuple:
    """What every event of one item shares: (code, category, low, high); computed once per itemid."""
    coding = [
        compact({"system": f"{CS}{rule.code_system}", "code": itemid, "display": item["label"] or None})
    ]
    if loinc:
        coding.append(loinc)
    category = [
        {"coding": [compact({"system": f"{CS}observation-category", "code": item["category"] or None})]}
    ]
    low, high = number(item["lownormalvalue"]), number(item["highnormalvalue"])
    return {"coding": coding}, category, low, high


def item_event(rule: ItemEvents, row: dict[str, str], parts: tuple) -> dict[str, Any]:
    """Hot path (330 M chartevents in full MIMIC): plain dict building."""
    code, category, low, high = parts
    obs: dict[str, Any] = {
        "resourceType": "Observation",
        "id": fhir_id(rule.profile, "-".join([row[k] for k in rule.key])),
        "meta": _item_meta(rule.profile),
        "status": "final",
        "category": category,
        "code": code,
        "subject": ref("Patient", "Patient", row["subject_id"]),
        "encounter": ref("Encounter", "EncounterICU", row["stay_id"]),
    }
    if row["charttime"]:
        obs["effectiveDateTime"] = instant(row["charttime"])
    if row["storetime"]:
        obs["issued"] = instant(row["storetime"])
    unit = row["valueuom"] or None
    if rule.value == "datetime":
        if row["value"]:
            obs["valueDateTime"] = instant(row["value"])
    elif rule.value == "quantity" or row.get("valuenum"):
        value = number(row.get("valuenum") or row["value"])
        if value is not None:
            obs["valueQuantity"] = _unit_quantity(value, unit)
    elif row["value"]:
        obs["valueString"] = row["value"]
    if rule.reference_range and (low is not None or high is not None):
        rr: dict[str, Any] = {}
        if low is not None:
            rr["low"] = _unit_quantity(low, unit)
        if high is not None:
            rr["high"] = _unit_quantity(high, unit)
        obs["referenceRange"] = [rr]
    return obs


@cache
def _item_meta(profile: str) -> dict[str, Any]:
    return meta(profile.replace("Observation", "observation-").lower())


def item_events_job(name: str):
    rule = ITEM_EVENTS[name]

    def run(ctx: MapContext) -> None:
        items, loinc = ctx.lookup("d_items"), crosswalk("d_items")
        parts: dict[str, tuple] = {}
        for row in ctx.rows(rule.table):
            if rule.require_value and not row["value"]:
                continue
            if rule.exclude and (row["stay_id"], row["charttime"]) in rule.exclude:
                continue
            itemid = row["itemid"]
            item_parts_ = parts.get(itemid)
            if item_parts_ is None:
                item = items.get(itemid)
                if item is None:
                    ctx.reject(rule.table, row, f"unknown itemid {itemid} (not in d_items)")
                    continue
                item_parts_ = parts[itemid] = item_parts(rule, itemid, item, loinc.get(itemid))
            ctx.emit(rule.profile, item_event(rule, row, item_parts_))

    run.__doc__ = f"{rule.profile} from {rule.table}."
    return run
