"""Medication orders: poe (+ poe_detail), prescriptions, pharmacy, eMAR (+ emar_detail).

Each drug is one order chain sharing poe_id and pharmacy_id. eMAR rows follow the pharmacy schedule
(disp_sched hours) and always fall inside [starttime, stoptime]. Drugs on the discharge list that were not
given in hospital are started on the last day, so every discharge medication exists as a prescription.
Each low magnesium/potassium result gets a one-time repletion order once the result is stored. Home drugs the
scenario holds (e.g. lisinopril in acute kidney injury, apixaban in a GI bleed) are neither given nor
continued at discharge, and the summary lists them as stopped.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import NamedTuple

from fhir_mapper.synth.context import SubjectSeq, SynthState, clamp, trim
from fhir_mapper.synth.synthetic_patient import Admission, Patient

ANTICOAGULANT_PROPHYLAXIS = ("heparin_sc", "enoxaparin")


class Dose(NamedTuple):
    """One scheduled administration, written to eMAR once all orders of the admission are known."""

    charted: datetime
    pharmacy_id: int
    scheduled: datetime
    drug_key: str
    poe_id: str
    given: bool
    stored: datetime


def _hour_ceil(moment: datetime) -> datetime:
    floor = moment.replace(minute=0, second=0, microsecond=0)
    return floor if floor == moment else floor + timedelta(hours=1)


def _unique(keys: list[str]) -> list[str]:
    return list(dict.fromkeys(keys))


def home_drugs(ctx: SynthState, p: Patient) -> list[str]:
    return _unique([d for c in p.comorbidities for d in ctx.cat.comorbidities[c]["drugs"]])


def sig(drug: dict) -> str:
    return f"{drug['drug']} {drug['dose']} {drug['unit']} {drug['route']} {drug['frequency']}"


def _poe(
    ctx: SynthState,
    p: Patient,
    adm: Admission,
    seq: SubjectSeq,
    at: datetime,
    order_type: str,
    subtype: str | None,
    details: dict[str, str] | None = None,
) -> tuple[str, int, str]:
    poe_seq = seq.new("poe")
    poe_id, provider = f"{p.subject_id}-{poe_seq}", ctx.provider()
    ctx.out.write(
        "hosp/poe",
        {
            "poe_id": poe_id,
            "poe_seq": poe_seq,
            "subject_id": p.subject_id,
            "hadm_id": adm.hadm_id,
            "ordertime": trim(at, "second"),
            "order_type": order_type,
            "order_subtype": subtype,
            "transaction_type": "New",
            "order_provider_id": provider,
            "order_status": "Inactive",
        },
    )
    for name, value in (details or {}).items():
        ctx.out.write(
            "hosp/poe_detail",
            {
                "poe_id": poe_id,
                "poe_seq": poe_seq,
                "subject_id": p.subject_id,
                "field_name": name,
                "field_value": value,
            },
        )
    return poe_id, poe_seq, provider


def _schedule(drug: dict, start: datetime, stop: datetime) -> list[datetime]:
    if not drug["hours"]:
        return [start]
    times, day = [], datetime.combine(start.date(), datetime.min.time())
    while day <= stop:
        times += [
            day + timedelta(hours=h) for h in drug["hours"] if start <= day + timedelta(hours=h) <= stop
        ]
        day += timedelta(days=1)
    return times


def _order(
    ctx: SynthState,
    p: Patient,
    adm: Admission,
    seq: SubjectSeq,
    key: str,
    start: datetime,
    stop: datetime,
    doses: list[Dose],
) -> None:
    """One order chain (poe, pharmacy, prescriptions); its scheduled doses are appended to `doses`."""
    rng, out, drug = ctx.rng, ctx.out, ctx.cat.drugs[key]
    ordered = max(adm.admittime, start - ctx.minutes(15, 90))
    poe_id, poe_seq, provider = _poe(ctx, p, adm, seq, ordered, "Medications", None)
    pharmacy_id = ctx.ids.new("pharmacy_id")
    per_day = float(len(drug["hours"])) if drug["hours"] else None
    entered = trim(ordered + ctx.minutes(1, 10), "second")
    common = {
        "subject_id": p.subject_id,
        "hadm_id": adm.hadm_id,
        "pharmacy_id": pharmacy_id,
        "poe_id": poe_id,
        "starttime": start,
        "stoptime": stop,
        "doses_per_24_hrs": per_day,
        "route": drug["route"],
    }
    out.write(
        "hosp/pharmacy",
        {
            **common,
            "medication": drug["drug"],
            "proc_type": "IV Piggyback" if drug["route"] == "IV" else "Unit Dose",
            "status": "Discontinued via patient discharge" if stop >= adm.dischtime else "Discontinued",
            "entertime": entered,
            "verifiedtime": trim(entered + ctx.minutes(5, 30), "second"),
            "frequency": drug["frequency"],
            "disp_sched": ", ".join(f"{h:02d}" for h in drug["hours"]) or None,
            "duration_interval": "Ongoing",
            "dispensation": "Omnicell",
        },
    )
    components = [("MAIN", drug)]
    if "base" in drug:  # the diluent bag: a second row of the same pharmacy_id (a medication mix)
        components.append(("BASE", ctx.cat.bases[drug["base"]]))
    for drug_type, component in components:
        out.write(
            "hosp/prescriptions",
            {
                **common,
                "poe_seq": poe_seq,
                "order_provider_id": provider,
                "drug_type": drug_type,
                "drug": component["drug"],
                "formulary_drug_cd": component["code"],
                "prod_strength": component["strength"],
                "dose_val_rx": component["dose"],
                "dose_unit_rx": component["unit"],
                "form_val_disp": component["disp"],
                "form_unit_disp": component["disp_unit"],
            },
        )
    for scheduled in _schedule(drug, start, stop):
        charted = trim(clamp(scheduled + ctx.minutes(-30, 30), start, stop))
        doses.append(
            Dose(
                charted,
                pharmacy_id,
                scheduled,
                key,
                poe_id,
                rng.random() < 0.95,
                trim(charted + ctx.minutes(0, 15)),
            )
        )


def _write_emar(ctx: SynthState, p: Patient, adm: Admission, seq: SubjectSeq, doses: list[Dose]) -> None:
    """eMAR rows in chart order, so emar_seq grows with time as in MIMIC (two emar_detail rows per dose
    given: the order-level parent and the product actually given)."""
    out = ctx.out
    for dose in sorted(doses):
        drug = ctx.cat.drugs[dose.drug_key]
        emar_seq = seq.new("emar")
        ids = {"subject_id": p.subject_id, "emar_id": f"{p.subject_id}-{emar_seq}", "emar_seq": emar_seq}
        out.write(
            "hosp/emar",
            {
                **ids,
                "hadm_id": adm.hadm_id,
                "poe_id": dose.poe_id,
                "pharmacy_id": dose.pharmacy_id,
                "charttime": dose.charted,
                "medication": drug["drug"],
                "event_txt": "Administered" if dose.given else "Not Given",
                "scheduletime": dose.scheduled,
                "storetime": dose.stored,
            },
        )
        iv_antibiotic = drug["route"] == "IV" and drug["class"].startswith("Antibiotics")
        out.write(
            "hosp/emar_detail",
            {
                **ids,
                "administration_type": "IV Antibiotic"
                if iv_antibiotic
                else "Standard Maintenance Medication",
                "complete_dose_not_given": "No" if dose.given else None,
                "dose_due": drug["dose"],
                "dose_due_unit": drug["unit"],
                "will_remainder_of_dose_be_given": "No" if dose.given else None,
                "route": drug["route"],
            },
        )
        if dose.given:
            out.write(
                "hosp/emar_detail",
                {
                    **ids,
                    "parent_field_ordinal": 1.1,
                    "pharmacy_id": dose.pharmacy_id,
                    "barcode_type": "if",
                    "dose_given": drug["dose"],
                    "dose_given_unit": drug["unit"],
                    "product_amount_given": float(drug["disp"]),
                    "product_unit": drug["disp_unit"],
                    "product_code": drug["code"],
                    "product_description": f"{drug['drug']} {drug['strength']}",
                },
            )


def write_meds(ctx: SynthState, p: Patient, adm: Admission, seq: SubjectSeq) -> None:
    rng, scen, home = ctx.rng, adm.scenario, home_drugs(ctx, p)
    _poe(
        ctx,
        p,
        adm,
        seq,
        adm.admittime,
        "ADT orders",
        "Admit",
        {"Admit to": scen["ward"], "Admit category": "Admit to inpatient"},
    )
    held = [d for d in home if d in scen.get("hold", [])]
    home = [d for d in home if d not in held]
    adm.held_meds = [ctx.cat.drugs[d]["drug"] for d in held]
    inpatient = _unique(scen["drugs"] + home)
    if "apixaban" in inpatient:  # already anticoagulated: no heparin/enoxaparin prophylaxis on top
        inpatient = [d for d in inpatient if d not in ANTICOAGULANT_PROPHYLAXIS]
    discharge = [] if adm.deathtime else _unique(scen["discharge_drugs"] + home)
    last = adm.dischtime - timedelta(minutes=1)
    doses: list[Dose] = []
    for key in inpatient:
        start = _hour_ceil(adm.admittime + ctx.minutes(60, 240))
        if not ctx.cat.drugs[key]["hours"]:  # one-time dose
            stop = start + timedelta(hours=1)
        elif key in discharge or adm.deathtime:
            stop = last
        else:
            stop = max(start + timedelta(hours=2), trim(adm.dischtime - ctx.minutes(360, 1440)))
        if start < last and stop <= last:
            _order(ctx, p, adm, seq, key, start, stop, doses)
    for stored, key in adm.repletions:  # electrolyte repletion after each low result
        start = _hour_ceil(stored + ctx.minutes(20, 90))
        if start + timedelta(hours=1) <= last:
            _order(ctx, p, adm, seq, key, start, start + timedelta(hours=1), doses)
    for key in discharge:
        if key not in inpatient:
            start = _hour_ceil(max(adm.admittime + timedelta(hours=1), adm.dischtime - timedelta(hours=24)))
            if start < last:
                _order(ctx, p, adm, seq, key, start, last, doses)
        adm.discharge_meds.append(sig(ctx.cat.drugs[key]))
    _write_emar(ctx, p, adm, seq, doses)
    if not adm.deathtime:
        _poe(
            ctx,
            p,
            adm,
            seq,
            adm.dischtime - ctx.minutes(60, 240),
            "ADT orders",
            "Discharge",
            {
                "Discharge Planning": "Finalized",
                "Discharge When Ready": "Yes" if rng.random() < 0.5 else "No",
            },
        )
