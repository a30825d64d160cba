"""Observations from the ICU event tables coded by d_items (chartevents, datetimeevents, outputevents),
which share one generic builder driven by `ITEM_EVENTS` (labevents: labs.py)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from operator import itemgetter
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
from fhir_mapper.reader import schema
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

    def __post_init__(self) -> None:
        if len(self.key) < 2:
            raise ValueError("an item-event key joins two or more columns")


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


COLUMNS = ("subject_id", "stay_id", "charttime", "storetime", "itemid", "value", "valueuom")  # + valuenum


@dataclass
class ItemParts:
    """What every event of one item shares, built once per itemid and reused as the same objects."""

    code: dict[str, Any]
    category: list[dict[str, Any]]
    low: Any
    high: Any
    ranges: dict[str | None, list[dict[str, Any]] | None]  # referenceRange per unit

    def reference_range(self, unit: str | None) -> list[dict[str, Any]] | None:
        if unit not in self.ranges:
            rr: dict[str, Any] = {}
            if self.low is not None:
                rr["low"] = unit_quantity(self.low, unit)
            if self.high is not None:
                rr["high"] = unit_quantity(self.high, unit)
            self.ranges[unit] = [rr] if rr else None
        return self.ranges[unit]


def item_parts(rule: ItemEvents, itemid: str, item: dict[str, str], loinc: dict | None) -> ItemParts:
    coding = [
        compact({"system": f"{CS}{rule.code_system}", "code": itemid, "display": item["label"] or None})
    ]
    if loinc:
        coding.append(loinc)
    category = [
        {"coding": [compact({"system": f"{CS}observation-category", "code": item["category"] or None})]}
    ]
    low, high = number(item["lownormalvalue"]), number(item["highnormalvalue"])
    return ItemParts({"coding": coding}, category, low, high, {})


def item_event(
    rule: ItemEvents, row: tuple, key: str, parts: ItemParts, subject: dict, encounter: dict
) -> dict:
    """One row (COLUMNS order, then valuenum when the table has it, then the line) -> Observation."""
    _subject_id, _stay_id, charttime, storetime, _itemid, value, valueuom = row[:7]
    obs: dict[str, Any] = {
        "resourceType": "Observation",
        "id": fhir_id(rule.profile, key),
        "meta": _item_meta(rule.profile),
        "status": "final",
        "category": parts.category,
        "code": parts.code,
        "subject": subject,
        "encounter": encounter,
    }
    if charttime:
        obs["effectiveDateTime"] = instant(charttime)
    if storetime:
        obs["issued"] = instant(storetime)
    unit = valueuom or None
    valuenum = row[7] if len(row) == 9 else ""
    if rule.value == "datetime":
        if value:
            obs["valueDateTime"] = instant(value)
    elif rule.value == "quantity" or valuenum:
        number_ = number(valuenum or value)
        if number_ is not None:
            obs["valueQuantity"] = unit_quantity(number_, unit)
    elif value:
        obs["valueString"] = value
    if rule.reference_range:
        rr = parts.reference_range(unit)
        if rr is not None:
            obs["referenceRange"] = rr
    return obs


@cache
def _item_meta(profile: str) -> dict[str, Any]:
    return meta(profile.replace("Observation", "observation-").lower())


def item_events_job(name: str):
    rule = ITEM_EVENTS[name]
    columns = COLUMNS + (("valuenum",) if "valuenum" in schema()[rule.table] else ())
    key_of = itemgetter(*[columns.index(k) for k in rule.key])  # a tuple: keys have 2+ columns

    def run(ctx: MapContext) -> None:
        items, loinc = ctx.lookup("d_items"), crosswalk("d_items")
        parts: dict[str, ItemParts] = {}
        write = ctx.sink.writer(rule.profile)
        subject_id = stay_id = subject = encounter = None  # references per run of one patient / stay
        for row in ctx.tuples(rule.table, columns):
            if rule.require_value and not row[5]:
                continue
            if rule.exclude and (row[1], row[2]) in rule.exclude:
                continue
            itemid = row[4]
            item_parts_ = parts.get(itemid)
            if item_parts_ is None:
                item = items.get(itemid)
                if item is None:
                    ctx.reject_line(rule.table, row[-1], f"unknown itemid {itemid} (not in d_items)")
                    continue
                item_parts_ = parts[itemid] = item_parts(rule, itemid, item, loinc.get(itemid))
            if row[0] != subject_id:
                subject_id, subject = row[0], ref("Patient", "Patient", row[0])
            if row[1] != stay_id:
                stay_id, encounter = row[1], ref("Encounter", "EncounterICU", row[1])
            write(item_event(rule, row, "-".join(key_of(row)), item_parts_, subject, encounter))

    run.__doc__ = f"{rule.profile} from {rule.table}."
    return run
