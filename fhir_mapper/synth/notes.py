"""MIMIC-IV-Note tables: a short discharge summary per admission and a report per imaging study.

The summary is written from the admission record itself — chief complaint, diagnoses by their ICD titles,
presenting and discharge values of the abnormal labs, culture results, discharge medications (each one a
prescription of this admission) — so a patient simulator grounded on it agrees with the EHR.
"""

from __future__ import annotations

from datetime import datetime

from fhir_mapper.synth.context import SubjectSeq, SynthState, trim
from fhir_mapper.synth.synthetic_patient import Admission, Patient

SEX = {"F": "female", "M": "male"}


def _labs(ctx: SynthState, adm: Admission) -> list[str]:
    """Labs abnormal at presentation (scenario labs first), with the last value of the stay."""
    keys = [int(k) for k in adm.scenario["labs"]] + list(adm.labs_first)
    lines = []
    for itemid in dict.fromkeys(keys):
        if itemid not in adm.labs_first:
            continue
        first, unit, flag = adm.labs_first[itemid]
        if flag != "abnormal" and str(itemid) not in adm.scenario["labs"]:
            continue
        last = adm.labs_last[itemid][0]
        label = ctx.cat.labs[itemid]["label"]
        lines.append(
            f"- {label}: {first} {unit}".rstrip() + f" on admission, {last} {unit}".rstrip() + " at discharge"
        )
    return lines[:12]


def _exam(adm: Admission) -> str:
    """Presenting vital signs exactly as triaged in the ED (ed/triage), when the patient came through it."""
    v = adm.presenting_vitals
    if not v:
        return "VS: see flowsheet."
    return (
        f"VS: T {v['temperature']:.1f} HR {v['heartrate']:.0f} BP {v['sbp']:.0f}/{v['dbp']:.0f} "
        f"RR {v['resprate']:.0f} O2 {v['o2sat']:.0f}% RA"
    )


def discharge_text(ctx: SynthState, p: Patient, adm: Admission) -> str:
    scen = adm.scenario
    age = p.age_at(adm.admittime)
    diagnoses = "\n".join(f"- {title}" for _code, _v, title in adm.diagnoses)
    primary = adm.diagnoses[0][2]
    meds = "\n".join(f"{i}. {m}" for i, m in enumerate(adm.discharge_meds, start=1)) or "None."
    stopped = "\n".join(f"- {name}" for name in adm.held_meds)
    micro = "\n".join(f"- {m}" for m in adm.micro_findings) or "- No cultures sent."
    imaging = "\n".join(f"- {m}" for m in adm.imaging_impressions) or "- None."
    icu = f" The patient required care in the {adm.icu[0].careunit}." if adm.icu else ""
    disposition = "Expired" if adm.deathtime else adm.discharge_location.title()
    social = ctx.rng.choice(ctx.cat.demo["social"])
    job = ctx.fake.job().lower()
    return "\n".join(
        [
            "Name:  ___                     Unit No:   ___",
            "",
            "Allergies:\nNo Known Allergies / Adverse Drug Reactions",
            "",
            f"Admission Date:  {adm.admittime:%Y-%m-%d}{'':14}Discharge Date:   {adm.dischtime:%Y-%m-%d}",
            "",
            f"Sex:   {p.gender}",
            "",
            f"Service: {scen['service']}",
            "",
            f"Chief Complaint:\n{scen['chief_complaint']}",
            "",
            f"History of Present Illness:\n{age} year-old {SEX[p.gender]} who {scen['hpi']}.",
            "",
            f"Social History:\nWorked as a {job}; {social}.",
            "",
            f"Physical Exam:\n{_exam(adm)}",
            "",
            "Pertinent Results:\n" + ("\n".join(_labs(ctx, adm)) or "- Unremarkable."),
            "",
            f"Microbiology:\n{micro}",
            "",
            f"Imaging:\n{imaging}",
            "",
            f"Brief Hospital Course:\nThe patient was admitted for {primary.lower()}. {scen['course']}{icu}",
            "",
            f"Discharge Diagnoses:\n{diagnoses}",
            "",
            f"Discharge Medications:\n{meds}",
            "",
            *([f"Medications Stopped:\n{stopped}", ""] if stopped else []),
            f"Discharge Disposition:\n{disposition}",
            "",
            "Followup Instructions:\n___",
        ]
    )


def _note(
    ctx: SynthState,
    table: str,
    p: Patient,
    adm: Admission,
    seq: SubjectSeq,
    kind: str,
    charttime: datetime,
    text: str,
) -> None:
    note_seq = seq.new(kind)
    ctx.out.write(
        table,
        {
            "note_id": f"{p.subject_id}-{kind}-{note_seq}",
            "subject_id": p.subject_id,
            "hadm_id": adm.hadm_id,
            "note_type": kind,
            "note_seq": note_seq,
            "charttime": charttime,
            "storetime": trim(charttime + ctx.minutes(30, 600)),
            "text": text,
        },
    )


def write_notes(ctx: SynthState, p: Patient, adm: Admission, seq: SubjectSeq) -> None:
    study_key = adm.scenario["imaging"]
    if study_key:
        study = ctx.cat.imaging[study_key]
        taken = trim(adm.admittime + ctx.minutes(30, 300))
        text = (
            f"EXAMINATION:  {study['exam']}\n\nINDICATION:  {study['indication']}\n\n"
            f"TECHNIQUE:  Standard protocol.\n\nFINDINGS:\n\n{study['findings']}\n\n"
            f"IMPRESSION:\n\n{study['impression']}"
        )
        _note(ctx, "note/radiology", p, adm, seq, "RR", taken, text)
        adm.imaging_impressions.append(f"{study['exam']}: {study['impression']}")
    day = datetime.combine(adm.dischtime.date(), datetime.min.time())
    _note(ctx, "note/discharge", p, adm, seq, "DS", day, discharge_text(ctx, p, adm))
