"""Observations from the ICU event tables coded by d_items (chartevents, datetimeevents, outputevents),
which share one generic builder driven by `ITEM_EVENTS` (labevents: labs.py)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from fhir_mapper.context import MapContext
from fhir_mapper.fhir import (
    CS,
    compact,
    meta,
    unit_quantity,
)
from fhir_mapper.ids import fhir_id, ref
from fhir_mapper.loinc import crosswalk
from fhir_mapper.values import instant, number


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
            obs["valueQuantity"] = unit_quantity(value, unit)
    elif row["value"]:
        obs["valueString"] = row["value"]
    if rule.reference_range and (low is not None or high is not None):
        rr: dict[str, Any] = {}
        if low is not None:
            rr["low"] = unit_quantity(low, unit)
        if high is not None:
            rr["high"] = unit_quantity(high, unit)
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
