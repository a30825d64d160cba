"""Unit spellings and conversions (data/units.json): generic scale factors and the common labs' molar ones
(glucose mg/dL <-> mmol/L, creatinine mg/dL <-> µmol/L, ...)."""

from __future__ import annotations

from functools import cache

from services.consumers.scoring.lexicon import units


@cache
def _aliases() -> dict[str, str]:
    table = units()["aliases"]
    out = {key.replace(" ", ""): value for key, value in table.items()}
    out.update({value.lower().replace(" ", ""): value for value in table.values()})
    return out


def canonical_unit(spelling: str | None) -> str | None:
    """The canonical unit of a spelling ("MG/DL", "毫克/分升" -> "mg/dL"), or None when unknown."""
    if not spelling:
        return None
    key = spelling.lower().replace(" ", "").replace("μ", "µ").rstrip(".,;")
    return _aliases().get(key)


def analyte_of(code: str | None, label: str | None) -> str | None:
    """Which analyte of the conversion table a fact is about: by code first, then by a word of its label."""
    analytes = units()["analytes"]
    code_part = (code or "").rsplit("|", 1)[-1]
    for name, spec in analytes.items():
        if code_part and code_part in spec["codes"]:
            return name
    low = (label or "").lower()
    for name, spec in analytes.items():
        if low and any(word in low for word in spec["words"]):
            return name
    return None


def _factors(analyte: str | None, generic: bool = True) -> list[dict]:
    table = list(units()["generic"]) if generic else []
    if analyte is not None:
        table += units()["analytes"][analyte]["factors"]
    return table


def convert(value: float, from_unit: str, to_unit: str, analyte: str | None = None) -> float | None:
    """`value` in `from_unit` expressed in `to_unit` (canonical units), or None when none is known."""
    if from_unit == to_unit:
        return value
    for row in _factors(analyte):
        if row["from"] == from_unit and row["to"] == to_unit:
            return value * row["factor"]
        if row["to"] == from_unit and row["from"] == to_unit:
            return value / row["factor"]
    return None


def alternatives(
    value: float, unit: str | None, analyte: str | None, generic: bool = True
) -> dict[str, float]:
    """`value` (in `unit`) in every unit it converts to directly, its own included; `generic=False` leaves out
    the pure scale changes (what a number written without a unit may silently be in: the SI unit of a lab)."""
    if unit is None:
        return {}
    out = {unit: value}
    for row in _factors(analyte, generic):
        if row["from"] == unit:
            out[row["to"]] = value * row["factor"]
        elif row["to"] == unit:
            out[row["from"]] = value / row["factor"]
    return out
