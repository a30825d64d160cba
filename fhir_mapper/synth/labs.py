"""labevents: panels drawn at admission, each morning and (in the ICU) each afternoon, plus outpatient draws.

A lab's value starts at the scenario's presenting value and moves back toward the patient's baseline over
the stay; anion gap, hematocrit, MCHC and PT are derived from their panel
partners so panels agree with themselves.
`flag` is 'abnormal' exactly when the printed value lies outside the printed reference range; a low magnesium
or potassium queues a repletion dose (given by meds.py once the result is stored).
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from fhir_mapper.synth.context import SynthState, trim
from fhir_mapper.synth.synthetic_patient import Admission, Patient

# itemid -> function of the other values drawn in the same panel
DERIVED = {
    50868: lambda v: v[50983] - v[50902] - v[50882],  # anion gap = Na - Cl - HCO3
    51221: lambda v: v[51222] * 3.0,  # hematocrit ~ 3 x hemoglobin
    51249: lambda v: 100 * v[51222] / v[51221],  # MCHC
    51274: lambda v: v[51237] * 11.0,  # PT from INR
}


def lab_value(ctx: SynthState, p: Patient, adm: Admission | None, itemid: int, at: datetime) -> float:
    item = ctx.cat.labs[itemid]
    base = p.baseline[itemid]
    target = adm.scenario["labs"].get(str(itemid)) if adm else None
    if target is not None:
        tau = max(0.7, adm.los_days / 3)
        days = max(0.0, (at - adm.admittime).total_seconds() / 86400)
        # presenting value, recovering two thirds of the way back to baseline over the stay
        base = base + (target * adm.targets_jitter - base) * (0.35 + 0.65 * math.exp(-days / tau))
    return max(0.0, base + ctx.rng.gauss(0, item["sd"] * 0.3))


def _draw(
    ctx: SynthState, p: Patient, adm: Admission | None, at: datetime, panels: list[str], priority: str
) -> None:
    cat, rng, out = ctx.cat, ctx.rng, ctx.out
    stored = trim(at + ctx.minutes(40, 180))
    provider = ctx.provider() if rng.random() < 0.5 else None
    for panel in panels:
        items = cat.panels[panel]
        values = {i: lab_value(ctx, p, adm, i, at) for i in items if i not in DERIVED}
        for i in items:
            if i in DERIVED:
                values[i] = DERIVED[i](values) + rng.gauss(0, cat.labs[i]["sd"] * 0.2)
        specimen_id = ctx.ids.new("specimen_id")
        for itemid in items:
            item = cat.labs[itemid]
            text = f"{values[itemid]:.{item['dp']}f}"
            low, high = cat.lab_range(itemid, p.gender)
            number = float(text)
            flag = "abnormal" if low is not None and (number < low or number > high) else None
            out.write(
                "hosp/labevents",
                {
                    "labevent_id": ctx.ids.new("labevent_id"),
                    "subject_id": p.subject_id,
                    "hadm_id": adm.hadm_id if adm else None,
                    "specimen_id": specimen_id,
                    "itemid": itemid,
                    "order_provider_id": provider,
                    "charttime": at,
                    "storetime": stored,
                    "value": text,
                    "valuenum": text,
                    "valueuom": item["unit"] or None,
                    "ref_range_lower": low,
                    "ref_range_upper": high,
                    "flag": flag,
                    "priority": priority,
                },
            )
            if adm and itemid in cat.repletion and low is not None and number < low:
                adm.repletions.append((stored, cat.repletion[itemid]))
            if adm:
                adm.labs_first.setdefault(itemid, (text, item["unit"], flag or "normal"))
                adm.labs_last[itemid] = (text, item["unit"], flag or "normal")


def _schedule(ctx: SynthState, adm: Admission) -> list[tuple[datetime, list[str], str]]:
    """(charttime, panels, priority) of every inpatient draw, in time order."""
    rng, cat, scen = ctx.rng, ctx.cat, adm.scenario
    extra = scen["panels"]
    first = trim(adm.admittime + ctx.minutes(20, 90))
    draws = [(first, [*cat.daily_panels, *extra], "STAT")]
    if "TROP" in extra:
        draws += [(first + timedelta(hours=h), ["TROP"], "STAT") for h in (6, 12)]
    if "LACTATE" in extra:
        draws.append((first + timedelta(hours=4), ["LACTATE"], "STAT"))
    day = datetime.combine(adm.admittime.date(), datetime.min.time())
    for d in range(1, 40):
        morning = day + timedelta(days=d, minutes=rng.uniform(240, 390))
        if morning >= adm.dischtime:
            break
        panels = list(cat.daily_panels)
        panels += [p for p in ("COAG", "LFT") if p in extra and d % 2 == 0]
        in_icu = any(s.intime <= morning < s.outtime for s in adm.icu)
        if in_icu and "LACTATE" in extra:
            panels.append("LACTATE")
        draws.append((trim(morning), panels, "ROUTINE"))
        afternoon = day + timedelta(days=d, hours=16, minutes=rng.uniform(0, 60))
        if in_icu and afternoon < adm.dischtime:
            draws.append((trim(afternoon), ["BMP", "MG"], "ROUTINE"))
    return sorted((d for d in draws if d[0] < adm.dischtime), key=lambda d: d[0])


def write_labs(ctx: SynthState, p: Patient, adm: Admission) -> None:
    if ctx.rng.random() < 0.3:  # outpatient draw before the admission: no hadm_id
        when = trim(adm.admittime - timedelta(days=ctx.rng.uniform(3, 15)))
        _draw(ctx, p, None, when, ["BMP", "A1C"] if "t2dm" in p.comorbidities else ["BMP"], "ROUTINE")
    for at, panels, priority in _schedule(ctx, adm):
        _draw(ctx, p, adm, at, panels, priority)
