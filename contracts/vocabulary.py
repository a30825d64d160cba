"""The one clinical vocabulary (data/vocabulary.json): each lab, drug, condition and label once, with its EN
and ZH names, MIMIC-IV itemid, LOINC code and unit, and the sentence templates the simulator speaks.

The scenario builder, the assistants and the scorer all read it here, so a lab's code or a label's Chinese is
changed in one place. Other data files name an entry instead of copying it: a string of the exact form
`@labs.<key>.<field>` (e.g. `@labs.creatinine.itemid`) is replaced by `resolve` with that field, where a lab
also has the computed fields `mimic_code` and `loinc_code` (`system|code`) and `names` ({en, zh}).
Loaded once; lookups are pure (callers must not mutate what they get).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any, NotRequired, TypedDict, cast

DATA = Path(__file__).parent / "data" / "vocabulary.json"
LABITEMS = "http://mimic.mit.edu/fhir/mimic/CodeSystem/mimic-d-labitems"
LOINC = "http://loinc.org"
REFERENCE = "@"  # what a reference to an entry starts with, in other data files


class Named(TypedDict):
    """A name in each language."""

    en: str
    zh: str


class Lab(TypedDict):
    """A lab as the record codes it (MIMIC itemid, LOINC) and as a clinician and a patient name it."""

    itemid: str
    loinc: str
    en: str
    zh: str
    lay_en: str
    lay_zh: str
    unit: str | None
    decimals: int
    trend_delta: float
    low: float
    high: float
    repeat_itemids: NotRequired[list[str]]  # the same analyte by another method (a blood-gas redraw)


@cache
def vocabulary() -> dict[str, Any]:
    """The whole file (labs, drugs, conditions, social_history, organisms, antibiotics, labels, phrases)."""
    return json.loads(DATA.read_text(encoding="utf-8"))


def lab(key: str) -> Lab:
    return cast(Lab, vocabulary()["labs"][key])


def drug(key: str) -> dict[str, Any]:
    return vocabulary()["drugs"][key]


def condition(key: str) -> dict[str, Any]:
    return vocabulary()["conditions"][key]


def lab_code(key: str) -> str:
    """The lab's coding as the mapped record carries it (`system|itemid`)."""
    return f"{LABITEMS}|{lab(key)['itemid']}"


def label(key: str) -> Named:
    """A derived fact's label (a fresh dict: a fact may keep it)."""
    entry = vocabulary()["labels"][key]
    return {"en": entry["en"], "zh": entry["zh"]}


def phrase(key: str) -> dict[str, Any]:
    """A sentence template (or word list) per language."""
    return vocabulary()["phrases"][key]


def listing(names: Iterable[Named], language: str) -> str:
    """Names joined as a sentence lists them in `language` ("none" / "无" for no name)."""
    separator = phrase("list_separator")[language]
    return separator.join(n[language] for n in names) or label("none")[language]  # type: ignore[literal-required]


def _lab_field(key: str, field: str) -> Any:
    entry = lab(key)
    computed = {
        "mimic_code": lambda: lab_code(key),
        "loinc_code": lambda: f"{LOINC}|{entry['loinc']}",
        "names": lambda: {"en": entry["en"], "zh": entry["zh"]},
    }
    return computed[field]() if field in computed else entry[field]  # type: ignore[literal-required]


def reference(token: str) -> Any:
    """The value `@<table>.<key>.<field>` names (KeyError for an entry or field the vocabulary lacks)."""
    table, key, field = token.removeprefix(REFERENCE).split(".")
    if table == "labs":
        return _lab_field(key, field)
    return vocabulary()[table][key][field]


def resolve(node: Any) -> Any:
    """A data file's JSON with every `@table.key.field` string replaced by what it names."""
    if isinstance(node, dict):
        return {k: resolve(v) for k, v in node.items()}
    if isinstance(node, list):
        return [resolve(v) for v in node]
    if isinstance(node, str) and node.startswith(REFERENCE) and node.count(".") == 2:
        return reference(node)
    return node
