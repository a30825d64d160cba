"""Does an answer state a fact? Numbers within tolerance in any common format and unit (converted for the
common labs), trends and decisions through the conclusion cues, presence/absence, strings by substring.

A number counts only if it IS the fact's value (within tolerance, or the value rounded to the precision the
answer wrote it with, at least two significant digits), in the fact's unit, in a unit it converts to, or
without a unit (then in the fact's unit or a converted one)."""

from __future__ import annotations

import math

from contracts.languages import LANGUAGES
from contracts.scenario import Fact
from services.consumers.scoring.fact_phrases import phrase_stated, presence
from services.consumers.scoring.lexicon import lexicon
from services.consumers.scoring.numbers import Cited, cited_numbers
from services.consumers.scoring.text import find, normalize
from services.consumers.scoring.units import alternatives, analyte_of, canonical_unit


def _significant(value: float, decimals: int) -> int:
    if value == 0:
        return decimals + 1
    return max(0, math.floor(math.log10(abs(value))) + 1) + decimals


def number_matches(cited: Cited, target: float, tolerance: float | None) -> bool:
    """`cited` (already in the target's unit) is the target within tolerance or correctly rounded."""
    value = cited.value
    if tolerance is not None and abs(value - target) <= tolerance + 1e-9:
        return True
    if abs(value - target) <= max(abs(target), 1.0) * 1e-9:
        return True
    digits = cited.decimals
    return _significant(value, digits) >= 2 and round(target, digits) == round(value, digits)


def quantity_matches(cited: Cited, target: float, unit: str | None, analyte: str | None,
                     tolerance: float | None) -> bool:
    """`cited` states `target` (in `unit`, of `analyte`): within tolerance (or correctly rounded) in the
    unit it is written in when that is the target's unit or one it converts to; written without a unit, in
    the target's unit or the lab's converted one (never a mere scale change). A number in an unrelated unit
    ("2 mg" of a dose against a lab in mg/dL) never matches."""
    unit = canonical_unit(unit) or unit
    if cited.unit is not None and unit is not None:
        in_units = alternatives(target, unit, analyte)
        converted = in_units.get(cited.unit)
        return converted is not None and number_matches(cited, converted,
                                                        _scaled(tolerance, target, converted))
    unitless = alternatives(target, unit, analyte, generic=False) if unit else {}
    return any(number_matches(cited, value, _scaled(tolerance, target, value))
               for value in (unitless.values() if unitless else [target]))


def cited_value(text: str, fact: Fact) -> Cited | None:
    """The first number in `text` that is `fact`'s numeric value, if any."""
    target = float(fact.value)  # type: ignore[arg-type]
    analyte = analyte_of(fact.code, fact.label.en if fact.label else None)
    return next((cited for cited in cited_numbers(text)
                 if quantity_matches(cited, target, fact.unit, analyte, fact.tolerance)), None)


def _scaled(tolerance: float | None, target: float, converted: float) -> float | None:
    if tolerance is None or target == 0:
        return tolerance
    return tolerance * abs(converted / target)


def conclusion_of(text: str, labels: tuple[str, ...]) -> tuple[str | None, list[str]]:
    """The answer's lead conclusion among `labels` (the first non-negated cue; a negated yes/no cue counts
    for the opposite) and every label found."""
    lex = lexicon()
    norm = normalize(text)
    found: list[tuple[int, str]] = []
    for label in labels:
        cues = [c for lang in LANGUAGES for c in lex["conclusion"][label][lang]]
        for hit in find(norm, cues):
            if not hit.negated:
                found.append((hit.start, label))
            elif label in ("yes",):  # "not needed", "不需要": a negated yes is a no
                found.append((hit.start, "no"))
    found.sort()
    seen = list(dict.fromkeys(label for _, label in found))
    return (found[0][1] if found else None), seen


def conclusion_matches(text: str, expected: str) -> tuple[bool, str]:
    contradicts = lexicon()["contradicts"]
    group = ("yes", "no") if expected in ("yes", "no") else ("up", "down", "unchanged")
    if expected not in group:
        return False, f"unknown conclusion {expected!r}"
    lead, seen = conclusion_of(text, group)
    opposite = [label for label in seen if label in contradicts[expected]]
    passed = expected in seen and (lead == expected or not opposite)
    return passed, f"conclusion {lead or 'none'} (found {', '.join(seen) or 'nothing'}; expected {expected})"


def fact_stated(text: str, fact: Fact) -> tuple[bool, str]:
    """Whether `text` states `fact`, with the evidence."""
    value = fact.value
    if fact.kind == "trend" and isinstance(value, str):
        return conclusion_matches(text, value)
    if fact.kind == "decision" and isinstance(value, str):
        expected = lexicon()["decision_aliases"].get(value.lower())
        if expected:
            return conclusion_matches(text, expected)
    if isinstance(value, str) and fact.kind != "absent":
        return phrase_stated(text, fact, value)
    if fact.kind in ("exists", "absent") or isinstance(value, bool):
        return presence(text, fact)
    if isinstance(value, int | float):
        cited = cited_value(text, fact)
        if cited is not None:
            unit = f" {cited.unit}" if cited.unit else ""
            return True, f"cited {cited.text}{unit} for {value} {fact.unit or ''}"
        numbers = ", ".join(c.text + (f" {c.unit}" if c.unit else "") for c in cited_numbers(text)) or "none"
        return False, f"{value} {fact.unit or ''} not cited (numbers: {numbers})"
    return False, "fact has no checkable value"
