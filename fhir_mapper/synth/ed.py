"""MIMIC-IV-ED tables for every ED visit: edstays, triage, vitalsign, diagnosis, pyxis, medrecon.

Visits that led to an admission carry its hadm_id and the times in admissions.edregtime/edouttime;
the others are ED-only visits (disposition HOME etc., no hadm_id).
"""

from __future__ import annotations

from fhir_mapper.synth.context import SynthState, trim
from fhir_mapper.synth.meds import home_drugs
from fhir_mapper.synth.synthetic_patient import Admission, Patient, Stay

VITALS = {  # column -> (mean, sd, decimals, scenario vital itemid that shifts it)
    "temperature": (98.2, 0.5, 1, "223761"),
    "heartrate": (84, 10, 0, "220045"),
    "resprate": (17, 2, 0, "220210"),
    "o2sat": (97, 1.5, 0, "220277"),
    "sbp": (132, 14, 0, "220179"),
    "dbp": (78, 9, 0, "220180"),
}


def _vitals(ctx: SynthState, shifts: dict) -> dict:
    values = {}
    for column, (mean, sd, dp, itemid) in VITALS.items():
        v = mean + shifts.get(itemid, 0) + ctx.rng.gauss(0, sd * 0.5)
        values[column] = round(min(v, 100) if column == "o2sat" else v, dp)
    return values


def _visit(ctx: SynthState, p: Patient, stay: Stay, adm: Admission | None) -> None:
    rng, cat, out = ctx.rng, ctx.cat, ctx.out
    demo = cat.demo
    if adm:
        scen = adm.scenario
        complaint, symptom_keys, shifts = scen["triage"], scen["ed_dx"] + scen["dx"][:1], scen["vitals"]
        disposition = "ADMITTED"
    else:
        complaint, symptom = rng.choice(demo["ed_only_complaints"])
        symptom_keys, shifts, disposition = [symptom], {}, ctx.weighted(demo["ed_only_disposition"])
    ids = {"subject_id": p.subject_id, "stay_id": stay.stay_id}
    out.write(
        "ed/edstays",
        {
            **ids,
            "hadm_id": adm.hadm_id if adm else None,
            "intime": stay.intime,
            "outtime": stay.outtime,
            "gender": p.gender,
            "race": p.race,
            "arrival_transport": ctx.weighted(demo["arrival_transport"]),
            "disposition": disposition,
        },
    )
    triage = _vitals(ctx, shifts)
    if adm:
        adm.presenting_vitals = triage
    out.write(
        "ed/triage",
        {
            **ids,
            **triage,
            "pain": str(rng.randint(0, 10)),
            "acuity": float(rng.choice([1, 2, 2, 3, 3, 3, 4])),
            "chiefcomplaint": complaint,
        },
    )
    at = trim(stay.intime + ctx.minutes(5, 30))
    while at < stay.outtime:
        out.write(
            "ed/vitalsign",
            {
                **ids,
                "charttime": at,
                **_vitals(ctx, shifts),
                "rhythm": rng.choice(demo["ed_rhythm"]) if rng.random() < 0.3 else None,
                "pain": str(rng.randint(0, 10)),
            },
        )
        at = trim(at + ctx.minutes(50, 110))
    for seq_num, key in enumerate(symptom_keys, start=1):
        code, title = cat.diagnoses[key]["10"]
        out.write(
            "ed/diagnosis",
            {**ids, "seq_num": seq_num, "icd_code": code, "icd_version": 10, "icd_title": title.upper()},
        )
    given = (adm.scenario["drugs"][:2] if adm else []) + ["acetaminophen"]
    for med_rn, key in enumerate(dict.fromkeys(given), start=1):
        charted = trim(stay.intime + (stay.outtime - stay.intime) * rng.uniform(0.2, 0.8))
        out.write(
            "ed/pyxis",
            {**ids, "charttime": charted, "med_rn": med_rn, "name": cat.drugs[key]["drug"], "gsn_rn": 1},
        )
    reconciled = trim(stay.intime + ctx.minutes(20, 60))
    for key in home_drugs(ctx, p):
        drug = cat.drugs[key]
        out.write(
            "ed/medrecon",
            {
                **ids,
                "charttime": min(reconciled, stay.outtime),
                "name": drug["drug"],
                "etc_rn": 1,
                "etcdescription": drug["class"],
            },
        )


def write_ed(ctx: SynthState, p: Patient) -> None:
    for stay in p.ed_only:
        _visit(ctx, p, stay, None)
    for adm in p.admissions:
        if adm.ed:
            _visit(ctx, p, adm.ed, adm)
