"""Billing and outpatient tables: diagnoses_icd, procedures_icd, hcpcsevents, drgcodes, omr.

ICD codes come in the admission's version (9 or 10); the titles kept on the admission are the ones the
dictionaries carry, so the discharge summary names exactly what diagnoses_icd codes.
"""

from __future__ import annotations

from datetime import timedelta

from fhir_mapper.synth.context import SynthState
from fhir_mapper.synth.synthetic_patient import Admission, Patient


def write_coding(ctx: SynthState, p: Patient, adm: Admission) -> None:
    cat, rng, out, scen = ctx.cat, ctx.rng, ctx.out, adm.scenario
    version = str(adm.icd_version)
    base = {"subject_id": p.subject_id, "hadm_id": adm.hadm_id}
    concepts = list(dict.fromkeys(scen["dx"] + p.comorbidities))
    for seq_num, concept in enumerate(concepts, start=1):
        code, title = cat.diagnoses[concept][version]
        out.write(
            "hosp/diagnoses_icd", {**base, "seq_num": seq_num, "icd_code": code, "icd_version": version}
        )
        adm.diagnoses.append((code, adm.icd_version, title))
    procedures = list(scen["proc"])
    if adm.icu and scen["ventilated"]:
        procedures += ["intubation", "ventilation_24_96"]
    if adm.icu and scen["pressors"]:
        procedures.append("central_line")
    day = min(2.0, adm.los_days / 2)
    for seq_num, concept in enumerate(procedures, start=1):
        code, _title = cat.procedures[concept][version]
        out.write(
            "hosp/procedures_icd",
            {
                **base,
                "seq_num": seq_num,
                "icd_code": code,
                "icd_version": version,
                "chartdate": (adm.admittime + timedelta(days=day)).date(),
            },
        )
    for seq_num, code in enumerate(scen["hcpcs"], start=1):
        out.write(
            "hosp/hcpcsevents",
            {
                **base,
                "chartdate": (adm.admittime + timedelta(days=day)).date(),
                "hcpcs_cd": code,
                "seq_num": seq_num,
                "short_description": cat.hcpcs[code][1],
            },
        )
    for drg_type, drg_code, description in cat.drg[scen["drg"]]:
        apr = drg_type == "APR"
        out.write(
            "hosp/drgcodes",
            {
                **base,
                "drg_type": drg_type,
                "drg_code": drg_code,
                "description": description,
                "drg_severity": rng.randint(1, 4) if apr else None,
                "drg_mortality": rng.randint(1, 4) if apr else None,
            },
        )


def write_omr(ctx: SynthState, p: Patient) -> None:
    """Outpatient vitals a few weeks before each admission (Blood Pressure, Weight, Height, BMI)."""
    rng = ctx.rng
    for adm in p.admissions:
        when = (adm.admittime - timedelta(days=rng.uniform(10, 19))).date()
        weight = p.weight_kg + rng.gauss(0, 1.5)
        sbp, dbp = int(rng.gauss(128, 12)), int(rng.gauss(76, 8))
        results = [
            ("Blood Pressure", f"{sbp}/{dbp}"),
            ("Weight (Lbs)", f"{weight * 2.20462:.1f}"),
            ("Height (Inches)", f"{p.height_cm / 2.54:.0f}"),
            ("BMI (kg/m2)", f"{weight / (p.height_cm / 100) ** 2:.1f}"),
        ]
        for name, value in results:
            ctx.out.write(
                "hosp/omr",
                {
                    "subject_id": p.subject_id,
                    "chartdate": when,
                    "seq_num": 1,
                    "result_name": name,
                    "result_value": value,
                },
            )
