"""What an answer's numbers can be about: subject key -> the names an answer may use for it.

Keys are the facts' codes ("system|code"), the builder's labs (MIMIC d_labitems codes, so a lab the
scenario never asks about is still a subject: unasked-for results and future values over the whole record),
the record's drugs ("drug:<name>": a dose is a claim about the drug, never about a lab), and the labels of
facts without a code ("label:<name>"). One vocabulary for every check of a session, built once per scenario.
"""

from __future__ import annotations

from functools import cache

from contracts.scenario import Fact, Scenario
from contracts.vocabulary import LABITEMS, lab_code, vocabulary
from services.consumers.scoring.lexicon import claims, expand_terms, units
from services.consumers.scoring.units import analyte_of, canonical_unit


def subject_of(fact: Fact) -> str:
    """The subject key a fact is about."""
    if fact.code and fact.code.startswith(LABITEMS):
        return fact.code
    if fact.code and fact.code.startswith("urn:rounds:drug|"):
        return "drug:" + fact.code.split("|", 1)[1].lower()
    label = fact.label.en if fact.label else (fact.code or fact.kind)
    return "label:" + label.lower()


def _clean(names: list[str]) -> list[str]:
    return [n for n in expand_terms(names) if len(n) > 1 and canonical_unit(n) is None]


@cache
def _vocabulary_subjects() -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    labs = vocabulary()["labs"]
    for key, lab in labs.items():
        names = [lab["en"], lab["zh"], lab["lay_zh"]]
        if lab["lay_en"] not in claims()["panel_lay_names"]:
            names.append(lab["lay_en"])
        analyte = analyte_of(lab["itemid"], None)
        if analyte:
            names += units()["analytes"][analyte]["words"]
        out[lab_code(key)] = tuple(_clean(names))
    for name, drug in vocabulary()["drugs"].items():
        if isinstance(drug, dict):
            out["drug:" + name.lower()] = tuple(_clean([drug["en"], drug["zh"], *drug.get("match", [])]))
    return out


def subject_names(scenario: Scenario) -> dict[str, list[str]]:
    """Every subject of the session with its names (the scenario's facts first, then the vocabulary); one
    mapping per scenario object (a run's sessions share their parsed scenarios): read it, never change it."""
    cached = _NAMES.get(id(scenario))
    if cached is not None and cached[0] is scenario:
        return cached[1]
    names = _subject_names(scenario)
    if len(_NAMES) >= 256:
        _NAMES.pop(next(iter(_NAMES)))
    _NAMES[id(scenario)] = (scenario, names)  # the scenario is held: its id stays its own
    return names


_NAMES: dict[int, tuple[Scenario, dict[str, list[str]]]] = {}


def _subject_names(scenario: Scenario) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {key: list(names) for key, names in _vocabulary_subjects().items()}
    for key, names in claims()["other_subjects"].items():
        out[key] = list(names)
    for turn in scenario.turns:
        for fact in turn.facts:
            for en, zh in _listed(fact):  # the record's own names: "Dextrose 50%" names a drug
                key = "drug:" + en.lower()
                out[key] = list(dict.fromkeys([*out.get(key, []), *_clean([en, zh])]))
            if fact.kind == "decision":
                continue  # a rule's name ("reference range") is no subject of a number
            key = subject_of(fact)
            labels = [fact.label.en, fact.label.zh] if fact.label else []
            extra = _clean(labels) + list(claims()["suffix_names"].get(fact.unit or "", []))
            out[key] = list(dict.fromkeys([*out.get(key, []), *extra]))
    return out


def _listed(fact: Fact) -> list[tuple[str, str]]:
    """The (EN, ZH) names a count fact lists (`list_en` / `list_zh`, joined by ", " and "、" by the builder's
    bindings); ZH names pair with EN ones by position when the lists agree, else each EN name stands alone."""
    extra = fact.model_extra or {}
    en = [n for n in str(extra.get("list_en", "")).split(", ") if n and n != "none"]
    zh = [n for n in str(extra.get("list_zh", "")).split("、") if n and n != "无"]
    return list(zip(en, zh if len(zh) == len(en) else en, strict=True))


def turn_subjects(scenario: Scenario, index: int) -> set[str]:
    return {subject_of(fact) for fact in scenario.turns[index].facts}
