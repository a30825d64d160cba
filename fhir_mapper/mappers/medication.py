"""Medication, MedicationMix, MedicationRequest, MedicationDispense and MedicationAdministration from
prescriptions, pharmacy, emar/emar_detail and poe, following the official SQL
(kind-lab/mimic-fhir sql/medication/*.sql, fhir_medication_*.sql).

Joins are on pharmacy_id, emar_id and poe_id; lookups keep only the columns used.
"""

from __future__ import annotations

import re
from typing import Any

from fhir_mapper import vocab
from fhir_mapper.context import MapContext
from fhir_mapper.fhir import CS, UCUM, compact, concept, identifier, meta, period, quantity
from fhir_mapper.ids import fhir_id, ref, ref_once
from fhir_mapper.values import instant, number, plain_number, squash, strip

MIX_NARRATIVE = {
    "status": "generated",
    "div": '<div xmlns="http://www.w3.org/1999/xhtml">'
    "<p><b>Temporary narrative for medication mix</b></p></div>",
}
_FILL = re.compile(r"^\s*#?(\d+(\.\d+)?)\s*'*(|ml|bottle|btl|g|lb)'*\s*$", re.IGNORECASE)
PR_KEEP = (
    "subject_id",
    "hadm_id",
    "route",
    "starttime",
    "stoptime",
    "dose_val_rx",
    "dose_unit_rx",
    "form_val_disp",
    "form_unit_disp",
    "prod_strength",
    "drug_type",
    "drug",
    "formulary_drug_cd",
    "ndc",
)


def _ndc(ndc: str) -> str | None:
    return ndc if ndc and ndc != "0" else None


def med_id(pr: dict[str, str]) -> str:
    """drug[--formulary_drug_cd][--ndc]: the Medication natural key."""
    fdc, ndc = pr["formulary_drug_cd"], _ndc(pr["ndc"])
    return pr["drug"] + (f"--{fdc}" if fdc else "") + (f"--{ndc}" if ndc else "")


def _order(pr: dict[str, str]) -> tuple:
    """ORDER BY drug_type DESC, drug ASC (C collation; ties by key for determinism)."""
    return tuple(-ord(c) for c in pr["drug_type"]), pr["drug"], med_id(pr)


def medication(pr: dict[str, str]) -> dict[str, Any]:
    ndc, fdc, drug = _ndc(pr["ndc"]), pr["formulary_drug_cd"] or None, pr["drug"]
    ident = [{"system": f"{CS}medication-ndc", "value": ndc}] if ndc else []
    if fdc:
        ident.append({"system": f"{CS}medication-formulary-drug-cd", "value": fdc})
    ident.append({"system": f"{CS}medication-name", "value": drug})
    if ndc:
        code = {"system": f"{CS}medication-ndc", "code": ndc}
    elif fdc:
        code = {"system": f"{CS}medication-formulary-drug-cd", "code": squash(fdc)}
    else:
        code = {"system": f"{CS}medication-name", "code": squash(drug)}
    return {
        "resourceType": "Medication",
        "id": fhir_id("MedicationPrescriptions", med_id(pr)),
        "meta": meta("medication"),
        "identifier": ident,
        "code": {"coding": [code]},
        "status": "active",
    }


def medication_mix(mix_key: str, ingredient_keys: list[str]) -> dict[str, Any]:
    return {
        "resourceType": "Medication",
        "id": fhir_id("MedicationPrescriptions", mix_key),
        "meta": meta("medication"),
        "text": MIX_NARRATIVE,
        "identifier": identifier("medication-mix", mix_key),
        "status": "active",
        "ingredient": [
            {"itemReference": ref_once("Medication", "MedicationPrescriptions", k)} for k in ingredient_keys
        ],
    }


def _mix_keys(rows: list[dict[str, str]]) -> list[str]:
    """The official self-join on (pharmacy_id, drug, drug_type): every row pairs with its twins."""
    pairs = [
        (r, m) for r in rows for m in rows if m["drug"] == r["drug"] and m["drug_type"] == r["drug_type"]
    ]
    return [med_id(m) for _r, m in sorted(pairs, key=lambda p: (_order(p[0]), med_id(p[1])))]


def _timing(frequency: str | None, duration: Any, unit: str | None, need_both: bool) -> dict | None:
    if (frequency is None or duration is None) if need_both else (frequency is None and duration is None):
        return None
    return compact(
        {
            "code": concept(f"{CS}medication-frequency", frequency),
            "repeat": {"duration": duration, "durationUnit": unit} if duration is not None and unit else None,
        }
    )


def _max_per_hour(one_hr_max: Any) -> dict | None:
    if one_hr_max is None:
        return None
    return {"numerator": {"value": one_hr_max}, "denominator": {"value": 1, "unit": "h", "system": UCUM}}


def medication_request(
    pharmacy_id: str, rows: list[dict[str, str]], ph: dict[str, str] | None
) -> dict[str, Any]:
    if len(rows) == 1:  # most pharmacy_ids have one prescription row: MAX(x) is x
        only = rows[0]

        def top(col: str) -> str | None:
            return only[col] or None

    else:

        def top(col: str) -> str | None:
            values = [r[col] for r in rows if r[col]]
            return max(values) if values else None

    ph = ph or {}
    route = strip(ph.get("route") or top("route"))
    start = instant(ph.get("starttime") or top("starttime") or "")
    stop = instant(ph.get("stoptime") or top("stoptime") or "")
    frequency, one_hr_max = squash(ph.get("frequency")), plain_number(ph.get("one_hr_max"))
    duration, unit = number(ph.get("duration", "")), vocab.DURATION_UNIT.get(ph.get("duration_interval", ""))
    dose, dose_unit, strength = (
        plain_number(top("dose_val_rx")),
        strip(top("dose_unit_rx")),
        top("prod_strength"),
    )
    drug_code = med_id(rows[0]) if len(rows) == 1 else "_".join(med_id(r) for r in sorted(rows, key=_order))
    subject, hadm = max(rows, key=lambda r: int(r["subject_id"]))["subject_id"], top("hadm_id")
    dosage = None
    if any(v is not None for v in (strength, duration, frequency, top("dose_val_rx"), one_hr_max, route)):
        dosage = [
            compact(
                {
                    "text": strength,
                    "route": concept(f"{CS}medication-route", route),
                    "doseAndRate": [{"doseQuantity": quantity(dose, dose_unit)}]
                    if dose is not None
                    else None,
                    "timing": _timing(frequency, duration, unit, need_both=True),
                    "maxDosePerPeriod": _max_per_hour(one_hr_max),
                }
            )
        ]
    return compact(
        {
            "resourceType": "MedicationRequest",
            "id": fhir_id("MedicationRequest", pharmacy_id),
            "meta": meta("medication-request"),
            "identifier": identifier("medication-request-phid", pharmacy_id),
            "status": vocab.MEDREQ_STATUS.get(ph.get("status", ""), "unknown"),
            "intent": "order",
            "medicationReference": ref_once("Medication", "MedicationPrescriptions", drug_code),
            "subject": ref("Patient", "Patient", subject),
            "encounter": ref("Encounter", "Encounter", hadm) if hadm else None,
            "authoredOn": instant(ph.get("entertime", "")),
            "dosageInstruction": dosage,
            "dispenseRequest": {"validityPeriod": period(start, stop)}
            if start and stop and start <= stop
            else None,
        }
    )


def poe_medication_request(poe: dict[str, str], medication_name: str | None) -> dict[str, Any]:
    code, system = (medication_name, "name") if medication_name else (poe["order_type"], "poe-iv")
    return compact(
        {
            "resourceType": "MedicationRequest",
            "id": fhir_id("MedicationRequest", poe["poe_id"]),
            "meta": meta("medication-request"),
            "identifier": identifier("medication-request-poe", poe["poe_id"]),
            "status": vocab.MEDREQ_STATUS.get(poe["order_status"], "unknown"),
            "intent": "order",
            "medicationCodeableConcept": {"coding": [{"code": code, "system": f"{CS}medication-{system}"}]},
            "subject": ref("Patient", "Patient", poe["subject_id"]),
            "encounter": ref("Encounter", "Encounter", poe["hadm_id"]) if poe["hadm_id"] else None,
            "authoredOn": instant(poe["ordertime"]),
        }
    )


def medication_dispense(ph: dict[str, str], prescribed: bool) -> dict[str, Any]:
    frequency, one_hr_max, route = squash(ph["frequency"]), plain_number(ph["one_hr_max"]), strip(ph["route"])
    duration, unit = number(ph["duration"]), vocab.DURATION_UNIT.get(ph["duration_interval"])
    fill = _FILL.match(ph["fill_quantity"] or "")
    fill_unit = fill.group(3).lower().replace("btl", "bottle") if fill and fill.group(3) else None
    dosage = None
    if any(v is not None for v in (duration, frequency, one_hr_max, route)):
        dosage = [
            compact(
                {
                    "route": concept(f"{CS}medication-route", route),
                    "timing": _timing(frequency, duration, unit, need_both=False),
                    "maxDosePerPeriod": _max_per_hour(one_hr_max),
                }
            )
        ]
    pid = ph["pharmacy_id"]
    return compact(
        {
            "resourceType": "MedicationDispense",
            "id": fhir_id("MedicationDispense", pid),
            "meta": meta("medication-dispense"),
            "identifier": identifier("medication-dispense", pid),
            "status": "completed",
            "medicationCodeableConcept": {
                "coding": [{"code": squash(ph["medication"]), "system": f"{CS}medication-name"}]
            },
            "subject": ref("Patient", "Patient", ph["subject_id"]),
            "context": ref("Encounter", "Encounter", ph["hadm_id"]) if ph["hadm_id"] else None,
            "authorizingPrescription": [ref_once("MedicationRequest", "MedicationRequest", pid)]
            if prescribed
            else None,
            "quantity": compact({"value": number(fill.group(1)), "unit": fill_unit}) if fill else None,
            "dosageInstruction": dosage,
        }
    )


PH_KEEP = (
    "subject_id",
    "hadm_id",
    "pharmacy_id",
    "starttime",
    "stoptime",
    "medication",
    "status",
    "entertime",
    "route",
    "frequency",
    "one_hr_max",
    "duration",
    "duration_interval",
    "fill_quantity",
)


def _cogroup(a: list, b: list) -> list:
    """[prescription rows, pharmacy row] per pharmacy_id."""
    a[0].extend(b[0])
    a[1] = a[1] or b[1]
    return a


def run(ctx: MapContext) -> None:
    """Medication, MedicationMix, MedicationRequest, MedicationDispense, MedicationAdministration."""
    from fhir_mapper.mappers.administration import IdSet, run_emar

    by_pharmacy = ctx.groups(_cogroup)
    seen_meds: set[str] = set()
    for r in ctx.rows("hosp/prescriptions", ("pharmacy_id", *PR_KEEP)):
        if not r["drug"]:
            ctx.reject("hosp/prescriptions", r, "empty drug (no Medication key)")
            continue
        key = med_id(r)
        if key not in seen_meds:
            seen_meds.add(key)
            ctx.emit("Medication", medication(r))
        by_pharmacy.add(r["pharmacy_id"], [[r], None])
    for r in ctx.rows("hosp/pharmacy", PH_KEEP):
        by_pharmacy.add(r["pharmacy_id"], [[], r])

    mixes: set[str] = set()
    prescribed: list[int] = []
    for pid, (rows, ph) in by_pharmacy.items():
        if len(rows) > 1:
            keys = _mix_keys(rows)
            mix = "_".join(keys)
            if mix not in mixes:
                mixes.add(mix)
                ctx.emit("MedicationMix", medication_mix(mix, keys))
        if rows and pid:
            prescribed.append(int(pid))
            ctx.emit("MedicationRequest", medication_request(pid, rows, ph))
        if ph is not None and squash(ph["medication"]):
            ctx.emit("MedicationDispense", medication_dispense(ph, bool(rows) and bool(pid)))
    if ctx.has("hosp/emar") and ctx.has("hosp/emar_detail"):
        run_emar(
            ctx,
            IdSet(prescribed),
            lambda p, name: ctx.emit("MedicationRequest", poe_medication_request(p, name)),
        )
