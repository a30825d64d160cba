"""MedicationAdministration (emar + emar_detail + poe) and the poe-keyed MedicationRequests that eMAR
events without a prescription point to (official fhir_medication_administration.sql and the second
half of fhir_medication_request.sql)."""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from fhir_mapper.context import MapContext
from fhir_mapper.fhir import CS, concept, meta, unit_quantity
from fhir_mapper.ids import fhir_id, ref, ref_recent
from fhir_mapper.values import instant, number, squash, strip
from fhir_mapper.vocab import NULL_FLAVOR

IV_ORDERS = ("TPN", "IV therapy")
_NUMERIC = re.compile(r"^[0-9.]+$")
# emar rows travel as tuples (cheap to hold, spill and free): EMAR columns, then the line
EMAR = ("emar_id", "subject_id", "hadm_id", "poe_id", "pharmacy_id", "charttime", "medication", "event_txt")
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
DETAIL = ("emar_id", "parent_field_ordinal", *DETAIL_MAX, *DETAIL_MAX_NUM)
# a dose aggregate is a list in DETAIL_MAX + DETAIL_MAX_NUM order ('' -> None, numbers parsed)
SITE, ROUTE, GIVEN, GIVEN_UNIT, PRODUCT_UNIT, RATE_UNIT, PRODUCT_CODE, AMOUNT, RATE, PHARMACY_ID = range(10)


MA_META = meta("medication-administration")
FORMULARY_CS, NAME_CS, POE_IV_CS = (f"{CS}medication-{k}" for k in ("formulary-drug-cd", "name", "poe-iv"))
SITE_CS, ROUTE_CS, METHOD_CS = (f"{CS}medication-{k}" for k in ("site", "route", "method"))
_CONCEPT = lru_cache(maxsize=1 << 14)(concept)  # sites, routes, methods repeat: one shared object each


@lru_cache(maxsize=1 << 14)
def _medication_code(system: str, code: str) -> dict[str, Any]:
    return {"coding": [{"system": system, "code": code}]}


def _dose(d: list[Any]) -> tuple[Any, str | None, str | None]:
    """(value, unit, text) from dose_given: 'N'/'INI' use the product amount, numbers stay numbers."""
    given = d[GIVEN]
    if given in ("N", "INI"):
        return d[AMOUNT], strip(d[PRODUCT_UNIT]), None
    if given and _NUMERIC.match(given):
        try:
            return number(given), strip(d[GIVEN_UNIT]), "1"
        except ValueError:
            pass
    return None, None, f"dose_given: {given or ''}{d[GIVEN_UNIT] or ''}"


def medication_administration(
    key: str, d: list[Any], em: tuple, poe: dict[str, str] | None, prescribed: bool
) -> dict[str, Any]:
    """One (emar_id, parent_field_ordinal): `d` its dose aggregate, `em` its emar row (EMAR order)."""
    _emar_id, subject_id, hadm_id, _poe_id, _pharmacy_id, charttime, medication, event_txt, _line = em
    if d[PRODUCT_CODE]:
        code, system = d[PRODUCT_CODE], FORMULARY_CS
    elif medication:
        code, system = squash(medication), NAME_CS
    elif poe and poe["order_type"] in IV_ORDERS:
        code, system = poe["order_type"], POE_IV_CS
    else:
        code, system = "UNK", NULL_FLAVOR
    request = str(d[PHARMACY_ID]) if prescribed else (poe["poe_id"] if poe else None)
    value, unit, text = _dose(d)
    rate = d[RATE]
    dosage: dict[str, Any] | None = None
    if value is not None or rate is not None:  # the official jsonb_strip_nulls: absent parts are left out
        dosage = {} if text is None else {"text": text}
        site, route, method = squash(d[SITE]), strip(d[ROUTE]), strip(event_txt)
        if site is not None:
            dosage["site"] = _CONCEPT(SITE_CS, site)
        if route is not None:
            dosage["route"] = _CONCEPT(ROUTE_CS, route)
        if method is not None:
            dosage["method"] = _CONCEPT(METHOD_CS, method)
        if value is not None:
            dosage["dose"] = unit_quantity(value, unit)
        if rate is not None:
            dosage["rateQuantity"] = unit_quantity(rate, strip(d[RATE_UNIT]))
    resource: dict[str, Any] = {
        "resourceType": "MedicationAdministration",
        "id": fhir_id("MedicationAdministration", key),
        "meta": MA_META,
        "status": "completed",
        "medicationCodeableConcept": _medication_code(system, code),
        "subject": ref("Patient", "Patient", subject_id),
    }
    if request:
        resource["request"] = ref_recent("MedicationRequest", "MedicationRequest", request)
    if hadm_id:
        resource["context"] = ref("Encounter", "Encounter", hadm_id)
    if charttime:
        resource["effectiveDateTime"] = instant(charttime)
    if dosage:
        resource["dosage"] = dosage
    return resource


def _dose_of(row: tuple) -> list[Any]:
    """One emar_detail row (DETAIL order) as a dose aggregate (numeric columns parsed)."""
    return [*[v or None for v in row[2:9]], number(row[9]), number(row[10]), number(row[11])]


def _merge_dose(a: list[Any] | None, b: list[Any]) -> list[Any]:
    """MAX() of each column, as the official GROUP BY (emar_id, parent_field_ordinal)."""
    if a is None:
        return b
    for c, v in enumerate(b):
        if v is not None and (a[c] is None or v > a[c]):
            a[c] = v
    return a


class IdSet:
    """A compact set of integer ids (sorted array + bisect): ~8 bytes per id instead of ~60."""

    def __init__(self, ids: list[int]) -> None:
        self._ids = array("q", sorted(set(ids)))

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, int):
            return False
        i = bisect_left(self._ids, value)
        return i < len(self._ids) and self._ids[i] == value

    def __len__(self) -> int:
        return len(self._ids)


def _by_emar(a: list, b: list) -> list:
    """[emar row, {parent_field_ordinal: dose aggregate}] per emar_id."""
    a[0] = a[0] or b[0]
    for ordinal, detail in b[1].items():
        a[1][ordinal] = _merge_dose(a[1].get(ordinal), detail)
    return a


def _by_poe(a: list, b: list) -> list:
    """[poe row, [(emar_id, emar row, doses)]] per poe_id."""
    a[0] = a[0] or b[0]
    a[1].extend(b[1])
    return a


def run_emar(ctx: MapContext, prescribed: IdSet, emit_request: Callable[[dict[str, str], str | None], None]):
    """MedicationAdministration per (emar_id, parent_field_ordinal); poe requests go to emit_request.

    Two bounded group-bys: emar + emar_detail by emar_id, then those + poe by poe_id.
    """
    by_emar = ctx.groups(_by_emar)
    for em in ctx.tuples("hosp/emar", EMAR, EMAR):
        by_emar.add(em[0], [em, {}])
    for r in ctx.tuples("hosp/emar_detail", DETAIL, DETAIL):
        if r[1]:
            by_emar.add(r[0], [None, {r[1]: _dose_of(r)}])
    by_poe = ctx.groups(_by_poe)
    for emar_id, (em, doses) in by_emar.items():
        if em is None:
            continue
        if em[3]:
            by_poe.add(em[3], [None, [(emar_id, em, doses)]])
        else:
            _administrations(ctx, emar_id, em, doses, None, prescribed)
    for r in ctx.rows("hosp/poe", POE_KEEP):
        by_poe.add(r["poe_id"], [r, []])
    for _poe_id, (p, events) in by_poe.items():
        if p is not None:
            iv = p["order_type"] in IV_ORDERS
            names = [  # em[6]: medication, em[4]: pharmacy_id
                squash(em[6])
                for _e, em, _d in events
                if (em[6] or iv) and (not em[4] or int(em[4]) not in prescribed)
            ]
            if names:
                emit_request(p, min((n for n in names if n), default=None))
        for emar_id, em, doses in events:
            _administrations(ctx, emar_id, em, doses, p, prescribed)


def _administrations(
    ctx: MapContext,
    emar_id: str,
    em: tuple,
    doses: dict[str, list[Any]],
    p: dict[str, str] | None,
    prescribed: IdSet,
) -> None:
    iv = p is not None and p["order_type"] in IV_ORDERS
    for ordinal, d in doses.items():
        has_rx = d[PHARMACY_ID] is not None and int(d[PHARMACY_ID]) in prescribed
        if has_rx or em[6] or iv:
            ctx.emit(
                "MedicationAdministration",
                medication_administration(f"{emar_id}-{ordinal}", d, em, p, has_rx),
            )
