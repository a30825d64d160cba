"""microbiologyevents: one specimen per culture of the scenario (+ an MRSA screen on ICU admission).

A negative culture is one row with a comment; a positive one is one row per antibiotic tested on the isolate.
Interpretations agree with the MIC: S when the dilution is <= the susceptible breakpoint, R when >= the
resistant breakpoint, I strictly between.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from fhir_mapper.synth.context import SynthState, trim
from fhir_mapper.synth.synthetic_patient import Admission, Patient

PAD = 10  # MIMIC pads dilution_comparison to 10 characters


def susceptibility(ctx: SynthState, ab: dict, resistant_p: float) -> dict:
    """Pick S/I/R, then a dilution consistent with it and the breakpoints."""
    rng, dil = ctx.rng, ab["dilutions"]
    s_values = [d for d in dil if d <= ab["s"]]
    i_values = [d for d in dil if ab["s"] < d < ab["r"]]
    roll = rng.random()
    if roll < resistant_p:
        value, comparison, interpretation = dil[-1], "=>", "R"
    elif roll < resistant_p + 0.05 and i_values:
        value, comparison, interpretation = rng.choice(i_values), "=", "I"
    else:
        value = rng.choice(s_values)
        comparison, interpretation = ("<=" if value == dil[0] else "="), "S"
    number = f"{value:g}"
    return {
        "dilution_text": f"{comparison if comparison != '=' else ''}{number}",
        "dilution_comparison": comparison.ljust(PAD),
        "dilution_value": value,
        "interpretation": interpretation,
    }


def _culture(
    ctx: SynthState, p: Patient, adm: Admission, culture_key: str, organism_key: str | None, drawn: datetime
) -> None:
    micro, rng = ctx.cat.micro, ctx.rng
    culture = micro["cultures"][culture_key]
    stored = trim(drawn + timedelta(days=rng.uniform(1.5, 3.5)))
    base = {
        "subject_id": p.subject_id,
        "hadm_id": adm.hadm_id,
        "micro_specimen_id": ctx.ids.new("micro_specimen_id"),
        "order_provider_id": ctx.provider(),
        "chartdate": datetime.combine(drawn.date(), datetime.min.time()),
        "charttime": drawn,
        "spec_itemid": culture["spec_itemid"],
        "spec_type_desc": culture["spec_type_desc"],
        "test_seq": 1,
        "storedate": datetime.combine(stored.date(), datetime.min.time()),
        "storetime": stored,
        "test_itemid": culture["test_itemid"],
        "test_name": culture["test_name"],
    }
    if organism_key is None:
        ctx.out.write(
            "hosp/microbiologyevents",
            {**base, "microevent_id": ctx.ids.new("microevent_id"), "comments": culture["negative"]},
        )
        adm.micro_findings.append(f"{culture['spec_type_desc'].lower()} culture: {culture['negative']}")
        return
    org = micro["organisms"][organism_key]
    isolate = {
        **base,
        "org_itemid": org["org_itemid"],
        "org_name": org["org_name"],
        "isolate_num": 1,
        "quantity": culture["quantity"] or None,
    }
    for ab_key, resistant_p in org["resist"].items():
        ab = micro["antibiotics"][ab_key]
        ctx.out.write(
            "hosp/microbiologyevents",
            {
                **isolate,
                "microevent_id": ctx.ids.new("microevent_id"),
                "ab_itemid": ab["ab_itemid"],
                "ab_name": ab["ab_name"],
                **susceptibility(ctx, ab, resistant_p),
            },
        )
    adm.micro_findings.append(f"{culture['spec_type_desc'].lower()} culture grew {org['org_name']}")


def write_micro(ctx: SynthState, p: Patient, adm: Admission) -> None:
    drawn = trim(adm.admittime + ctx.minutes(15, 120))
    for culture_key, organism_key in adm.scenario["cultures"].items():
        # blood cultures are positive in only part of the bacteremic patients
        positive = organism_key if culture_key != "blood" or ctx.rng.random() < 0.5 else None
        _culture(ctx, p, adm, culture_key, positive, drawn)
    for stay in adm.icu:
        _culture(ctx, p, adm, "mrsa_screen", None, trim(stay.intime + ctx.minutes(30, 240)))
