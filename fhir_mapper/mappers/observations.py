"""Observations from MIMIC item dictionaries: labevents (+ SpecimenLab) and the ICU event tables
(chartevents, datetimeevents, outputevents), which share one generic builder driven by `ITEM_EVENTS`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from fhir_mapper import vocab
from fhir_mapper.context import MapContext
from fhir_mapper.fhir import CS, DATA_ABSENT, INTERPRETATION, LABORATORY, compact, identifier, meta, quantity
from fhir_mapper.ids import fhir_id, ref, ref_once
from fhir_mapper.loinc import crosswalk
from fhir_mapper.values import instant, number, strip

_LETTER = re.compile(r"[a-zA-Z]")
_COMPARATORS = ("<=", "<", ">=", ">")


def _lab_value(value: str | None, valuenum: str) -> tuple[Any, str | None]:
    """(numeric value, comparator) as the official query parses '<0.01', '>=1000', ..."""
    comparator = next((c for c in _COMPARATORS if value and c in value), None)
    if comparator is None and value:
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
    low = (comments or "").lower()
    return (
        "entered-in-error"
        if "error" in low
        else "corrected"
        if "corrected" in low
        else "cancelled"
        if "cancel" in low
        else "final"
    )


def labevent(row: dict[str, str], label: str, loinc: dict[str, str] | None) -> dict[str, Any]:
    value, comments, unit = strip(row["value"]), row["comments"] or None, row["valueuom"].strip() or None
    num, comparator = _lab_value(value, row["valuenum"])
    flag = vocab.LAB_INTERPRETATION.get(row["flag"])
    low, high = number(row["ref_range_lower"]), number(row["ref_range_upper"])
    coding = [compact({"system": f"{CS}d-labitems", "code": row["itemid"], "display": label})]
    if loinc:
        coding.append(loinc)
    return compact(
        {
            "resourceType": "Observation",
            "id": fhir_id("ObservationLabevents", row["labevent_id"]),
            "meta": meta("observation-labevents"),
            "extension": [
                {
                    "url": "http://mimic.mit.edu/fhir/mimic/StructureDefinition/lab-priority",
                    "valueString": row["priority"],
                }
            ]
            if row["priority"]
            else None,
            "identifier": identifier("observation-labevents", row["labevent_id"]),
            "status": _lab_status(comments),
            "category": LABORATORY,
            "code": {"coding": coding},
            "subject": ref("Patient", "Patient", row["subject_id"]),
            "encounter": ref("Encounter", "Encounter", row["hadm_id"]) if row["hadm_id"] else None,
            "effectiveDateTime": instant(row["charttime"]),
            "issued": instant(row["storetime"]),
            "valueQuantity": quantity(num, unit, comparator=comparator),
            "valueString": (value or comments) if num is None else None,
            "dataAbsentReason": {"coding": [{"system": DATA_ABSENT, "code": "unknown"}]}
            if num is None and value is None and comments is None
            else None,
            "interpretation": [{"coding": [{"system": INTERPRETATION, "code": flag[0], "display": flag[1]}]}]
            if flag
            else None,
            "note": [{"text": comments}] if comments else None,
            "specimen": ref_once("Specimen", "SpecimenLab", row["specimen_id"]),
            "referenceRange": [compact({"low": quantity(low, unit), "high": quantity(high, unit)})]
            if low is not None or high is not None
            else None,
        }
    )


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
    specimens: dict[int, list[Any]] = {}
    for row in ctx.rows("hosp/labevents"):
        item = items.get(row["itemid"])
        if item is None:
            ctx.reject("hosp/labevents", row, f"unknown itemid {row['itemid']} (not in d_labitems)")
            continue
        ctx.emit("ObservationLabevents", labevent(row, item[0], loinc.get(row["itemid"])))
        key, itemid, subject = int(row["specimen_id"]), int(row["itemid"]), int(row["subject_id"])
        agg = specimens.get(key)
        if agg is None:
            specimens[key] = [itemid, subject, row["charttime"]]
        else:
            agg[0], agg[1], agg[2] = max(agg[0], itemid), max(agg[1], subject), max(agg[2], row["charttime"])
    for key, (itemid, subject, charttime) in specimens.items():
        ctx.emit(
            "SpecimenLab", specimen_lab(key, subject, charttime, (items.get(str(itemid)) or (None, None))[1])
        )


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


ITEM_EVENTS = {
    "chartevents": ItemEvents(
        "ObservationChartevents",
        "icu/chartevents",
        ("stay_id", "charttime", "itemid", "value"),
        "chartevents-d-items",
        "numeric-or-text",
        reference_range=True,
        require_value=True,
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


def _item_value(rule: ItemEvents, row: dict[str, str]) -> dict[str, Any]:
    unit = row["valueuom"] or None
    if rule.value == "datetime":
        return {"valueDateTime": instant(row["value"])}
    if rule.value == "quantity" or row.get("valuenum"):
        return {"valueQuantity": quantity(number(row.get("valuenum") or row["value"]), unit)}
    return {"valueString": row["value"]}


def item_event(
    rule: ItemEvents, row: dict[str, str], item: dict[str, str], loinc: dict | None
) -> dict[str, Any]:
    coding = [
        compact(
            {"system": f"{CS}{rule.code_system}", "code": row["itemid"], "display": item["label"] or None}
        )
    ]
    if loinc:
        coding.append(loinc)
    unit = row["valueuom"] or None
    low, high = number(item["lownormalvalue"]), number(item["highnormalvalue"])
    return compact(
        {
            "resourceType": "Observation",
            "id": fhir_id(rule.profile, "-".join(row[k] for k in rule.key)),
            "meta": meta(rule.profile.replace("Observation", "observation-").lower()),
            "status": "final",
            "category": [
                {
                    "coding": [
                        compact({"system": f"{CS}observation-category", "code": item["category"] or None})
                    ]
                }
            ],
            "code": {"coding": coding},
            "subject": ref("Patient", "Patient", row["subject_id"]),
            "encounter": ref("Encounter", "EncounterICU", row["stay_id"]),
            "effectiveDateTime": instant(row["charttime"]),
            "issued": instant(row["storetime"]),
            **_item_value(rule, row),
            "referenceRange": [compact({"low": quantity(low, unit), "high": quantity(high, unit)})]
            if rule.reference_range and (low is not None or high is not None)
            else None,
        }
    )


def item_events_job(name: str):
    rule = ITEM_EVENTS[name]

    def run(ctx: MapContext) -> None:
        items, loinc = ctx.lookup("d_items"), crosswalk("d_items")
        for row in ctx.rows(rule.table):
            if rule.require_value and not row["value"]:
                continue
            item = items.get(row["itemid"])
            if item is None:
                ctx.reject(rule.table, row, f"unknown itemid {row['itemid']} (not in d_items)")
                continue
            ctx.emit(rule.profile, item_event(rule, row, item, loinc.get(row["itemid"])))

    run.__doc__ = f"{rule.profile} from {rule.table}."
    return run
