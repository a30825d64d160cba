"""ICU charting inside each icustays window: chartevents (vitals, rhythm, GCS, weight, height),
inputevents + ingredientevents, outputevents, procedureevents and datetimeevents.

Vital signs start shifted by the scenario (e.g. septic tachycardia, fever, hypotension) and recover toward
normal over the stay; `warning` is 1 when a value is outside the item's alarm limits.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from fhir_mapper.synth.context import SynthState, trim
from fhir_mapper.synth.labs import lab_value
from fhir_mapper.synth.synthetic_patient import Admission, Patient, Stay

GLUCOSE = 50931  # serum glucose (labevents), which the fingersticks follow


def _hours(stay: Stay, every: float, offset_min: float = 0) -> list[datetime]:
    first = stay.intime.replace(minute=0, second=0) + timedelta(hours=1, minutes=offset_min)
    count = int((stay.outtime - first).total_seconds() // (every * 3600)) + 1
    return [t for t in (first + timedelta(hours=every * i) for i in range(max(0, count))) if t < stay.outtime]


def _recovery(adm: Admission, at: datetime) -> float:
    days = (at - adm.admittime).total_seconds() / 86400
    return math.exp(-days / max(0.7, adm.los_days / 3))


def _chart(
    ctx: SynthState, base: dict, at: datetime, item: dict, value: str, valuenum: float | None, warning: int
) -> None:
    ctx.out.write(
        "icu/chartevents",
        {
            **base,
            "caregiver_id": ctx.caregiver(),
            "charttime": at,
            "storetime": trim(at + ctx.minutes(1, 25)),
            "itemid": item["itemid"],
            "value": value,
            "valuenum": valuenum,
            "valueuom": item.get("unitname") or None,
            "warning": warning,
        },
    )


def _vitals(ctx: SynthState, p: Patient, adm: Admission, stay: Stay, base: dict) -> None:
    rng, icu, shifts = ctx.rng, ctx.cat.icu, adm.scenario["vitals"]
    for at in _hours(stay, 1):
        factor = _recovery(adm, at)
        values = {}
        for item in icu["vitals"]:
            if at.hour % item["every"]:
                continue
            if item.get("derived") == "map":
                v = (values[220179] + 2 * values[220180]) / 3
            else:
                v = (
                    item["mean"]
                    + shifts.get(str(item["itemid"]), 0) * factor
                    + rng.gauss(0, item["sd"] * 0.4)
                )
            v = round(min(item.get("max", math.inf), v), item["dp"])
            values[item["itemid"]] = v
            text = f"{v:.{item['dp']}f}"
            _chart(
                ctx, base, at, item, text, float(text), int(not item["warn_low"] <= v <= item["warn_high"])
            )
        if at.hour % 4 == 0:
            for item in icu["text_items"]:
                value = rng.choice(item["values"])
                if item.get("afib_value") and (adm.scenario.get("afib") or "afib" in p.comorbidities):
                    value = item["afib_value"]
                _chart(ctx, base, at, item, value, None, 0)
    admit = trim(stay.intime + ctx.minutes(10, 50))
    weight = icu["weight"]
    _chart(ctx, base, admit, weight, f"{p.weight_kg:.1f}", p.weight_kg, 0)
    _chart(ctx, base, admit, icu["height"], f"{p.height_cm:.0f}", float(p.height_cm), 0)
    for at in _hours(stay, 24, offset_min=rng.uniform(0, 59))[1:]:
        w = round(p.weight_kg + rng.gauss(0, 0.8), 1)
        _chart(ctx, base, trim(at), icu["daily_weight"], f"{w:.1f}", w, 0)


def _ventilator(ctx: SynthState, base: dict, start: datetime, end: datetime) -> None:
    """Ventilator settings every 4 h while ventilated, weaning from the items' start to end values."""
    at = start.replace(minute=0) + timedelta(hours=1)
    while at < end:
        done = (at - start) / (end - start)
        for item in ctx.cat.icu["ventilator"]:
            v = round(item["start"] + (item["end"] - item["start"]) * done + ctx.rng.gauss(0, item["sd"]))
            _chart(ctx, base, at, item, str(v), float(v), 0)
        at += timedelta(hours=4)


def _fingersticks(ctx: SynthState, p: Patient, adm: Admission, stay: Stay, base: dict) -> None:
    """Point-of-care glucose every 6 h, on the same trend as the serum glucose of labevents."""
    item = ctx.cat.icu["fingerstick"]
    for at in _hours(stay, item["every"], offset_min=ctx.rng.uniform(0, 59)):
        v = round(lab_value(ctx, p, adm, GLUCOSE, at))
        _chart(ctx, base, trim(at), item, str(v), float(v), int(not 70 <= v <= 180))


def _input(
    ctx: SynthState, p: Patient, stay: Stay, base: dict, key: str, start: datetime, hours: float
) -> None:
    item = ctx.cat.icu["inputs"][key]
    end = min(stay.outtime - timedelta(minutes=1), trim(start + timedelta(hours=hours)))
    if end <= start:
        return
    minutes = (end - start).total_seconds() / 60
    rate = item["rate"]
    if item["rateuom"] == "mcg/kg/min":
        amount = round(rate * p.weight_kg * minutes / 1000, 4)
    elif rate is None:
        amount = round(ctx.rng.uniform(100, 400), 0)
    else:
        amount = round(rate * minutes / 60, 4)
    orderid = ctx.ids.new("orderid")
    caregiver = ctx.caregiver()
    stored = trim(end + ctx.minutes(1, 30))
    ctx.out.write(
        "icu/inputevents",
        {
            **base,
            "caregiver_id": caregiver,
            "starttime": start,
            "endtime": end,
            "storetime": stored,
            "itemid": item["itemid"],
            "amount": amount,
            "amountuom": item["amountuom"],
            "rate": rate,
            "rateuom": item["rateuom"] or None,
            "orderid": orderid,
            "linkorderid": orderid,
            "ordercategoryname": item["ordercategoryname"],
            "ordercomponenttypedescription": "Main order parameter",
            "ordercategorydescription": item["ordercategorydescription"],
            "patientweight": p.weight_kg,
            "totalamount": amount,
            "totalamountuom": item["amountuom"],
            "isopenbag": 0,
            "continueinnextdept": 0,
            "statusdescription": "FinishedRunning",
            "originalamount": amount,
            "originalrate": rate,
        },
    )
    if item["amountuom"] == "ml":  # the water content of every fluid is an ingredient
        water = ctx.cat.icu["ingredient"]
        ctx.out.write(
            "icu/ingredientevents",
            {
                **base,
                "caregiver_id": caregiver,
                "starttime": start,
                "endtime": end,
                "storetime": stored,
                "itemid": water["itemid"],
                "amount": amount,
                "amountuom": "ml",
                "rate": rate,
                "rateuom": item["rateuom"] or None,
                "orderid": orderid,
                "linkorderid": orderid,
                "statusdescription": "FinishedRunning",
                "originalamount": 0,
                "originalrate": rate,
            },
        )


def _procedure(
    ctx: SynthState, p: Patient, stay: Stay, base: dict, key: str, start: datetime, end: datetime
) -> None:
    item = ctx.cat.icu["procedures"][key]
    end = min(end, stay.outtime)
    minutes = max(1, round((end - start).total_seconds() / 60))
    orderid = ctx.ids.new("orderid")
    ctx.out.write(
        "icu/procedureevents",
        {
            **base,
            "caregiver_id": ctx.caregiver(),
            "starttime": start,
            "endtime": end,
            "storetime": trim(end + ctx.minutes(1, 60)),
            "itemid": item["itemid"],
            "value": minutes,
            "valueuom": "min",
            "location": item["location"] or None,
            "locationcategory": item["locationcategory"] or None,
            "orderid": orderid,
            "linkorderid": orderid,
            "ordercategoryname": item["ordercategoryname"],
            "ordercategorydescription": "ContinuousProcess" if minutes > 1 else "Task",
            "patientweight": p.weight_kg,
            "isopenbag": 0,
            "continueinnextdept": 0,
            "statusdescription": "FinishedRunning",
            "ORIGINALAMOUNT": minutes,
            "ORIGINALRATE": 1,
        },
    )
    if "datetime_itemid" in item:
        dt_item = next(d for d in ctx.cat.icu["datetimes"] if d["itemid"] == item["datetime_itemid"])
        charted = trim(min(stay.outtime, start + ctx.minutes(5, 60)))
        ctx.out.write(
            "icu/datetimeevents",
            {
                **base,
                "caregiver_id": ctx.caregiver(),
                "charttime": charted,
                "storetime": charted,
                "itemid": dt_item["itemid"],
                "value": start,
                "valueuom": "Date and Time",
                "warning": 0,
            },
        )


def write_icu(ctx: SynthState, p: Patient, adm: Admission) -> None:
    rng, scen = ctx.rng, adm.scenario
    for stay in adm.icu:
        base = {"subject_id": p.subject_id, "hadm_id": adm.hadm_id, "stay_id": stay.stay_id}
        _vitals(ctx, p, adm, stay, base)
        if "t2dm" in p.comorbidities or str(GLUCOSE) in scen["labs"]:
            _fingersticks(ctx, p, adm, stay, base)
        t0 = trim(stay.intime + ctx.minutes(5, 40))
        _procedure(ctx, p, stay, base, "peripheral_iv", t0, stay.outtime)
        _procedure(ctx, p, stay, base, "ekg", t0, t0 + timedelta(minutes=1))
        _procedure(
            ctx, p, stay, base, "chest_xray", t0 + timedelta(hours=1), t0 + timedelta(hours=1, minutes=1)
        )
        if scen["pressors"]:
            _procedure(ctx, p, stay, base, "arterial_line", t0 + timedelta(minutes=30), stay.outtime)
            _input(ctx, p, stay, base, "norepinephrine", t0 + timedelta(hours=1), rng.uniform(8, 30))
        if scen["ventilated"]:
            vent_start = t0 + timedelta(minutes=20)
            vent_end = min(stay.outtime, t0 + timedelta(hours=rng.uniform(24, 72)))
            _procedure(ctx, p, stay, base, "ventilation", vent_start, vent_end)
            _ventilator(ctx, base, vent_start, vent_end)
            _input(ctx, p, stay, base, "propofol", t0 + timedelta(minutes=30), rng.uniform(12, 48))
        for drip, (low, high) in scen.get("icu_drips", {}).items():
            _input(ctx, p, stay, base, drip, t0 + timedelta(minutes=15), rng.uniform(low, high))
        for block in range(int((stay.outtime - t0).total_seconds() // (8 * 3600)) + 1):
            start = t0 + timedelta(hours=8 * block)
            _input(ctx, p, stay, base, "saline" if block < 3 else "d5w", start, 8)
            if block >= 1 and rng.random() < 0.6:
                _input(ctx, p, stay, base, "po_intake", trim(start + ctx.minutes(60, 300)), 0.05)
        outputs = ctx.cat.icu["outputs"]
        for at in _hours(stay, 2, offset_min=rng.uniform(0, 59)):
            item = outputs[0]
            ml = max(0, round(rng.gauss(item["mean"], item["sd"]) * 2))
            ctx.out.write(
                "icu/outputevents",
                {
                    **base,
                    "caregiver_id": ctx.caregiver(),
                    "charttime": trim(at),
                    "storetime": trim(at + ctx.minutes(1, 30)),
                    "itemid": item["itemid"],
                    "value": ml,
                    "valueuom": "mL",
                },
            )
        if scen["cultures"].get("blood", "absent") != "absent":
            _procedure(ctx, p, stay, base, "blood_cultured", t0, t0 + timedelta(minutes=1))
