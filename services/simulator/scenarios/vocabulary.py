"""The scenario builder's lookups in the clinical vocabulary (contracts/vocabulary.py): which vocabulary drug
a MIMIC drug name is, which condition an ICD code is, and how organisms and antibiotics are named."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from contracts.vocabulary import LABITEMS, LOINC, condition, drug, lab, lab_code, vocabulary

__all__ = ["LABITEMS", "LOINC", "condition", "drug", "lab", "lab_code", "lab_keys_by_itemid",
           "repeat_keys_by_itemid", "vocabulary"]

DATA = Path(__file__).parent / "data"


@cache
def lab_keys_by_itemid() -> dict[str, str]:
    return {entry["itemid"]: key for key, entry in vocabulary()["labs"].items()}


@cache
def repeat_keys_by_itemid() -> dict[str, str]:
    """Itemids that measure a vocabulary lab by another method (whole blood on a blood gas) -> the lab."""
    return {itemid: key for key, entry in vocabulary()["labs"].items()
            for itemid in entry.get("repeat_itemids", ())}


def drug_key(name: str) -> str | None:
    """The vocabulary drug a MIMIC drug name is (first match in file order), or None."""
    low = name.lower()
    for key, entry in vocabulary()["drugs"].items():
        if any(m in low for m in entry["match"]) and not any(x in low for x in entry.get("exclude", ())):
            return key
    return None


def drug_name(name: str) -> str:
    """One key per drug of the record for a name outside the vocabulary: MIMIC spells one drug's orders with
    varying case and spacing ("Sodium Chloride 0.9%  Flush")."""
    return " ".join(name.lower().split())


NAMELESS = {"", "unk", "unknown"}  # an order the record names by none of these is not a drug one can count


def drug_identity(name: str) -> str | None:
    """One drug as a clinician counts it: the vocabulary drug (potassium chloride tablets and a potassium
    chloride replacement protocol are one drug), else the record's name normalised; None for a nameless
    order, which a clinician cannot count."""
    if drug_name(name) in NAMELESS:
        return None
    return drug_key(name) or drug_name(name)


def condition_key(system: str, code: str) -> str | None:
    """The vocabulary condition an ICD code (MIMIC form, no dots) belongs to, or None."""
    field = "icd10" if "icd10" in system else "icd9"
    for key, entry in vocabulary()["conditions"].items():
        if any(code.startswith(prefix) for prefix in entry[field]):
            return key
    return None


def _named(table: str, name: str) -> dict[str, str]:
    """EN/ZH for an organism or antibiotic name; the longest known fragment wins, else the record's own
    name."""
    entries = {k: v for k, v in vocabulary()[table].items() if k != "_doc"}
    upper = name.upper()
    hits = sorted((k for k in entries if k in upper), key=len, reverse=True)
    if hits:
        return entries[hits[0]]
    plain = name.strip().lower()
    return {"en": plain, "zh": plain}


def organism_names(name: str) -> dict[str, str]:
    names = dict(_named("organisms", name))
    names.setdefault("key", max(re.findall(r"[a-z]+", name.lower()) or [name.lower()], key=len))
    return names


def antibiotic_names(name: str) -> dict[str, str]:
    return _named("antibiotics", name)
