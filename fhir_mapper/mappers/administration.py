"""MedicationAdministration (emar + emar_detail + poe) and the poe-keyed MedicationRequests that eMAR
events without a prescription point to (official fhir_medication_administration.sql and the second
half of fhir_medication_request.sql)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from fhir_mapper.context import MapContext
from fhir_mapper.fhir import CS, compact, concept, meta, quantity
from fhir_mapper.ids import fhir_id, ref, ref_once
from fhir_mapper.values import instant, number, squash, strip

NULL_FLAVOR = "http://terminology.hl7.org/CodeSystem/v3-NullFlavor"
IV_ORDERS = ("TPN", "IV therapy")
_NUMERIC = re.compile(r"^[0-9.]+$")
EMAR_KEEP = ("subject_id", "hadm_id", "poe_id", "pharmacy_id", "charttime", "medication", "event_txt")
POE_KEEP = ("poe_id", "subject_id", "hadm_id", "ordertime", "order_type", "order_status")
DETAIL_MAX = (
    "site",
    "route",
    "dose_given",
    "dose_given_unit",
    "product_unit",
    "infusion_rate_unit",
    "product_code",
)
DETAIL_MAX_NUM = ("product_amount_given", "infusion_rate", "pharmacy_id")


def _dose(d: dict[str, Any]) -> tuple[Any, str | None, str | None]:
    """(value, unit, text) from dose_given: 'N'/'INI' use the product amount, numbers stay numbers."""
    given = d["dose_given"]
    if given in ("N", "INI"):
        return d["product_amount_given"], strip(d["product_unit"]), None
    if given and _NUMERIC.match(given):
        try:
            return number(given), strip(d["dose_given_unit"]), "1"
        except ValueError:
            pass
    return None, None, f"dose_given: {given or ''}{d['dose_given_unit'] or ''}"


def medication_administration(
    key: str, d: dict[str, Any], em: dict[str, str], poe: dict[str, str] | None, prescribed: bool
) -> dict[str, Any]:
    if d["product_code"]:
        code, system = d["product_code"], f"{CS}medication-formulary-drug-cd"
    elif em["medication"]:
        code, system = squash(em["medication"]), f"{CS}medication-name"
    elif poe and poe["order_type"] in IV_ORDERS:
        code, system = poe["order_type"], f"{CS}medication-poe-iv"
    else:
        code, system = "UNK", NULL_FLAVOR
    request = str(d["pharmacy_id"]) if prescribed else (poe["poe_id"] if poe else None)
    value, unit, text = _dose(d)
    rate = d["infusion_rate"]
    dosage = None
    if value is not None or rate is not None:
        site = squash(d["site"])
        dosage = compact(
            {
                "text": text,
                "site": concept(f"{CS}medication-site", site),
                "route": concept(f"{CS}medication-route", strip(d["route"])),
                "method": concept(f"{CS}medication-method", strip(em["event_txt"])),
                "dose": quantity(value, unit),
                "rateQuantity": quantity(rate, strip(d["infusion_rate_unit"])),
            }
        )
    return compact(
        {
            "resourceType": "MedicationAdministration",
            "id": fhir_id("MedicationAdministration", key),
            "meta": meta("medication-administration"),
            "status": "completed",
            "medicationCodeableConcept": {"coding": [{"system": system, "code": code}]},
            "request": ref_once("MedicationRequest", "MedicationRequest", request) if request else None,
            "subject": ref("Patient", "Patient", em["subject_id"]),
            "context": ref("Encounter", "Encounter", em["hadm_id"]) if em["hadm_id"] else None,
            "effectiveDateTime": instant(em["charttime"]),
            "dosage": dosage,
        }
    )


def _merge_detail(agg: dict[str, Any] | None, row: dict[str, str]) -> dict[str, Any]:
    """MAX() of each column over the emar_detail rows of one (emar_id, parent_field_ordinal)."""
    if agg is None:
        agg = {c: None for c in DETAIL_MAX + DETAIL_MAX_NUM}
    for c in DETAIL_MAX:
        if row[c] and (agg[c] is None or row[c] > agg[c]):
            agg[c] = row[c]
    for c in DETAIL_MAX_NUM:
        v = number(row[c])
        if v is not None and (agg[c] is None or v > agg[c]):
            agg[c] = v
    return agg


def run_emar(
    ctx: MapContext, prescribed: set[int], emit_request: Callable[[dict[str, str], str | None], None]
):
    """MedicationAdministration per (emar_id, parent_field_ordinal); poe requests go to emit_request."""
    emar: dict[str, dict[str, str]] = {}
    for r in ctx.rows("hosp/emar"):
        emar[r["emar_id"]] = {k: r[k] for k in EMAR_KEEP}
    wanted = {e["poe_id"] for e in emar.values() if e["poe_id"]}
    poe = {r["poe_id"]: {k: r[k] for k in POE_KEEP} for r in ctx.rows("hosp/poe") if r["poe_id"] in wanted}

    requested: set[str] = set()
    for e in emar.values():
        p = poe.get(e["poe_id"])
        iv = p is not None and p["order_type"] in IV_ORDERS
        unprescribed = not e["pharmacy_id"] or int(e["pharmacy_id"]) not in prescribed
        if unprescribed and p is not None and (e["medication"] or iv) and p["poe_id"] not in requested:
            requested.add(p["poe_id"])
            emit_request(p, squash(e["medication"]))

    details: dict[tuple[str, str], dict[str, Any]] = {}
    for r in ctx.rows("hosp/emar_detail"):
        if r["parent_field_ordinal"]:
            key = (r["emar_id"], r["parent_field_ordinal"])
            details[key] = _merge_detail(details.get(key), r)
    for (emar_id, ordinal), d in details.items():
        em = emar.get(emar_id)
        if em is None:
            continue
        p = poe.get(em["poe_id"])
        has_rx = d["pharmacy_id"] is not None and d["pharmacy_id"] in prescribed
        if has_rx or em["medication"] or (p is not None and p["order_type"] in IV_ORDERS):
            ctx.emit(
                "MedicationAdministration",
                medication_administration(f"{emar_id}-{ordinal}", d, em, p, has_rx),
            )
