"""Patient lifetimes: demographics, admissions, ED visits, ward/ICU segments — and the core ADT tables.

Invariants (tested): admissions do not overlap and lie after the 18th birthday; ED visits end after admittime;
ward and ICU segments tile [first unit intime, dischtime]; death (dod) is on or after the last discharge.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from fhir_mapper.synth.context import SynthState, trim
from fhir_mapper.synth.synthetic_patient import Admission, Patient, Stay

ED_ADMISSION_TYPES = {"EW EMER.", "OBSERVATION ADMIT", "EU OBSERVATION"}
ED_UNIT = "Emergency Department"


def build_patient(ctx: SynthState, index: int) -> Patient:
    rng, cat = ctx.rng, ctx.cat
    demo = cat.demo
    age = int(min(91, max(18, rng.gauss(62, 17))))
    comorbid = [k for k, c in cat.comorbidities.items() if rng.random() < c["p"] * (0.5 + age / 80)]
    baseline = {}
    for itemid, item in cat.labs.items():
        baseline[itemid] = item["mean"] + rng.gauss(0, item["sd"] * 0.6)
    for key in comorbid:
        for itemid, value in cat.comorbidities[key].get("labs", {}).items():
            baseline[int(itemid)] = value * rng.uniform(0.9, 1.1)
    gender = rng.choice("FM")
    height = rng.gauss(163 if gender == "F" else 177, 7)
    bmi = rng.gauss(33 if "obesity" in comorbid else 26, 3)
    patient = Patient(
        subject_id=ctx.ids.new("subject_id"),
        index=index,
        gender=gender,
        anchor_age=age,
        anchor_year=rng.randint(2111, 2195),
        anchor_year_group=rng.choice(demo["anchor_year_group"]),
        race=ctx.weighted(demo["race"]),
        insurance=ctx.weighted(demo["insurance"]),
        language=ctx.weighted(demo["language"]),
        marital_status=ctx.weighted(demo["marital_status"]),
        comorbidities=comorbid,
        weight_kg=round(bmi * (height / 100) ** 2, 1),
        height_cm=round(height),
        baseline=baseline,
    )
    start = datetime(patient.anchor_year, 1, 1) + timedelta(days=rng.uniform(0, 364))
    if rng.random() < 0.15:
        visit_in = trim(start - timedelta(days=rng.uniform(20, 200)))
        patient.ed_only.append(
            Stay(ctx.ids.new("ed_stay_id"), visit_in, trim(visit_in + ctx.minutes(120, 420)))
        )
    n_admissions = 1
    while n_admissions < 4 and rng.random() < 0.35:
        n_admissions += 1
    for _ in range(n_admissions):
        adm = _admission(ctx, patient, start)
        patient.admissions.append(adm)
        if adm.deathtime:
            patient.dod = adm.deathtime.date()
            break
        start = adm.dischtime + timedelta(days=rng.uniform(20, 400))
    if patient.dod is None and rng.random() < 0.05 + age / 900:
        patient.dod = (patient.admissions[-1].dischtime + timedelta(days=rng.uniform(1, 700))).date()
    return patient


def _icd_version(patient: Patient, moment: datetime) -> int:
    """ICD-9 before the (real-time) October 2015 switch, from the anchor year group."""
    real_year = int(patient.anchor_year_group[:4]) + 1 + moment.year - patient.anchor_year
    return 9 if real_year < 2015 else 10


def _admission(ctx: SynthState, patient: Patient, start: datetime) -> Admission:
    rng, cat = ctx.rng, ctx.cat
    key = ctx.weighted({k: s["weight"] for k, s in cat.scenarios.items()})
    scen = cat.scenarios[key]
    demo = cat.demo
    if scen.get("surgical") and rng.random() < 0.5:
        adm_type, location = ctx.weighted(demo["elective_admission"]), "PHYSICIAN REFERRAL"
    else:
        adm_type = ctx.weighted(demo["emergency_admission"])
        location = (
            demo["ed_admission_location"]
            if adm_type in ED_ADMISSION_TYPES
            else ctx.weighted(demo["other_admission_location"])
        )
    start = trim(start)
    ed = None
    if location == demo["ed_admission_location"]:
        admittime = trim(start + ctx.minutes(120, 360))
        ed = Stay(ctx.ids.new("ed_stay_id"), start, trim(admittime + ctx.minutes(30, 180)), ED_UNIT)
        first_in = ed.outtime
    else:
        admittime = start
        first_in = admittime
    los = min(20.0, max(1.0, math.exp(rng.gauss(1.3, 0.5))))
    adm = Admission(
        hadm_id=ctx.ids.new("hadm_id"),
        scenario_key=key,
        scenario=scen,
        admittime=admittime,
        dischtime=trim(first_in + timedelta(days=los)),
        admission_type=adm_type,
        admission_location=location,
        discharge_location=ctx.weighted(demo["discharge_location"]),
        icd_version=_icd_version(patient, admittime),
        ed=ed,
        targets_jitter=rng.uniform(0.85, 1.15),
    )
    _segments(ctx, adm, first_in, los)
    dies = rng.random() < (0.03 + (0.08 if adm.icu else 0) + patient.age_at(admittime) / 2000)
    if dies:
        adm.deathtime, adm.discharge_location = adm.dischtime, "DIED"
    return adm


def _segments(ctx: SynthState, adm: Admission, first_in: datetime, los: float) -> None:
    """Ward and ICU units from the first unit to discharge; ICU segments become icustays."""
    rng, scen = ctx.rng, adm.scenario
    second = timedelta(seconds=1)
    cuts = [first_in]
    units = [scen["ward"]]
    if rng.random() < scen["icu_prob"]:
        icu_days = min(rng.uniform(1, 4), 0.6 * los)
        if rng.random() < 0.6:  # straight to the ICU, then the ward
            units = [scen["icu_unit"], scen["ward"]]
            cuts.append(first_in + timedelta(days=icu_days))
        else:  # deteriorates on the ward
            ward_days = rng.uniform(0.2, 0.3 * los)
            units = [scen["ward"], scen["icu_unit"], scen["ward"]]
            cuts += [first_in + timedelta(days=ward_days), first_in + timedelta(days=ward_days + icu_days)]
    cuts = [cuts[0]] + [trim(c, "second") + second * rng.randint(0, 59) for c in cuts[1:]] + [adm.dischtime]
    for unit, t_in, t_out in zip(units, cuts[:-1], cuts[1:], strict=True):
        adm.ward_segments.append((unit, t_in, t_out))
        if unit == scen["icu_unit"]:
            adm.icu.append(Stay(ctx.ids.new("icu_stay_id"), t_in, t_out, unit))


def write_core(ctx: SynthState, p: Patient) -> None:
    """patients, admissions, transfers, icustays, services."""
    out = ctx.out
    out.write(
        "hosp/patients",
        {
            "subject_id": p.subject_id,
            "gender": p.gender,
            "anchor_age": p.anchor_age,
            "anchor_year": p.anchor_year,
            "anchor_year_group": p.anchor_year_group,
            "dod": p.dod,
        },
    )
    for visit in p.ed_only:  # ED visits that were not admitted appear in transfers without hadm_id
        out.write(
            "hosp/transfers",
            {
                "subject_id": p.subject_id,
                "transfer_id": ctx.ids.new("transfer_id"),
                "eventtype": "ED",
                "careunit": ED_UNIT,
                "intime": visit.intime,
                "outtime": visit.outtime,
            },
        )
    for adm in p.admissions:
        out.write(
            "hosp/admissions",
            {
                "subject_id": p.subject_id,
                "hadm_id": adm.hadm_id,
                "admittime": adm.admittime,
                "dischtime": adm.dischtime,
                "deathtime": adm.deathtime,
                "admission_type": adm.admission_type,
                "admit_provider_id": ctx.provider(),
                "admission_location": adm.admission_location,
                "discharge_location": adm.discharge_location,
                "insurance": p.insurance,
                "language": p.language,
                "marital_status": p.marital_status,
                "race": p.race,
                "edregtime": adm.ed.intime if adm.ed else None,
                "edouttime": adm.ed.outtime if adm.ed else None,
                "hospital_expire_flag": 1 if adm.deathtime else 0,
            },
        )
        base = {"subject_id": p.subject_id, "hadm_id": adm.hadm_id}
        if adm.ed:
            out.write(
                "hosp/transfers",
                {
                    **base,
                    "transfer_id": ctx.ids.new("transfer_id"),
                    "eventtype": "ED",
                    "careunit": ED_UNIT,
                    "intime": adm.ed.intime,
                    "outtime": adm.ward_segments[0][1],
                },
            )
        for i, (unit, t_in, t_out) in enumerate(adm.ward_segments):
            out.write(
                "hosp/transfers",
                {
                    **base,
                    "transfer_id": ctx.ids.new("transfer_id"),
                    "eventtype": "admit" if i == 0 else "transfer",
                    "careunit": unit,
                    "intime": t_in,
                    "outtime": t_out,
                },
            )
        out.write(
            "hosp/transfers",
            {
                **base,
                "transfer_id": ctx.ids.new("transfer_id"),
                "eventtype": "discharge",
                "careunit": None,
                "intime": adm.dischtime,
                "outtime": None,
            },
        )
        for stay in adm.icu:
            out.write(
                "icu/icustays",
                {
                    **base,
                    "stay_id": stay.stay_id,
                    "first_careunit": stay.careunit,
                    "last_careunit": stay.careunit,
                    "intime": stay.intime,
                    "outtime": stay.outtime,
                    "los": round((stay.outtime - stay.intime).total_seconds() / 86400, 6),
                },
            )
        out.write(
            "hosp/services",
            {
                **base,
                "transfertime": adm.admittime,
                "prev_service": None,
                "curr_service": adm.scenario["service"],
            },
        )
