"""An answer as claims (v3), in EN and ZH: every number it states as a `Claim` (subject, value, unit,
time) and, with `parse_answer`, every conclusion it draws as a `ConclusionClaim` (subject, direction or
verdict: cues.py). The models are claim_model.py; both kinds find their subject through ONE name search
(names.py).

A number's subject is the name nearest before it in its clause (else, for a number with a unit, the first
one after it): names come from `subject_names` (the scenario's facts, the builder's lab vocabulary, the drugs
of the record), so "potassium chloride 20 mEq" is a claim about the drug, not about potassium. A token after
a number that looks like a unit but is none the parser knows ("3.4 mEq" against mEq/L is fine, "3.4 meqs" is
not) makes the unit `unknown`; a number inside a unit ("mL/min/1.73m²"), a name ("Dextrose 50%") or a
date/time is no claim. `future` marks a clause with a future cue ("will be", "next draw", "下次").
Thresholds ("below 3.5") and counts ("13 results") stay claims with `threshold` set: the checks decide what
each may satisfy.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Mapping
from functools import cache

from services.consumers.scoring.lexicon import claims as _data
from services.consumers.scoring.numbers import Cited, cited_numbers, is_threshold
from services.consumers.scoring.text import Hit, find, normalize
from services.consumers.scoring.v3.claim_model import Claim, ConclusionClaim, ParsedAnswer
from services.consumers.scoring.v3.cues import conclusion_claims
from services.consumers.scoring.v3.names import Named, clauses, named_in

_RANGE = re.compile(r"\d(?:\.\d+)?\s?[-–~～]\s?\d")
_TOKEN = re.compile(r"\s?([a-zµ%/\u4e00-\u9fff^0-9]{1,10})")
_WORD_AFTER = re.compile(r"\s?([a-z]+)")
_WORD_BEFORE = re.compile(r"([a-z]+)\.?\s?$")


def _unit_unknown(norm: str, cited: Cited) -> bool:
    if cited.unit is not None:
        return False
    match = _TOKEN.match(norm, cited.start + len(cited.text))
    if not match:
        return False
    token = match.group(1)
    return token.startswith(tuple(_data()["unit_like"]))


def _inside_unit(norm: str, cited: Cited) -> bool:
    """"1.73" of "mL/min/1.73m²", "10" of "x10^9/L": part of a unit, not a value."""
    before = norm[max(0, cited.start - 1):cited.start]
    return before in ("/", "^") or norm[max(0, cited.start - 2):cited.start] in ("x1", "×")


def _date_part(norm: str, cited: Cited) -> bool:
    """"28 Feb", "Feb 28": a day of a month."""
    months = _months()
    end = cited.start + len(cited.text)
    after = _WORD_AFTER.match(norm, end, end + 12)
    if after is not None and after.group(1) in months:
        return True
    before = _WORD_BEFORE.search(norm, max(0, cited.start - 12), cited.start)
    return before is not None and before.group(1) in months


@cache
def _months() -> frozenset[str]:
    return frozenset(_data()["months"])


def _in_range(norm: str, cited: Cited) -> bool:
    """Either end of "4-11", "70–180": a range is a bound, not a result."""
    window = norm[max(0, cited.start - 12):cited.start + len(cited.text) + 12]
    at = cited.start - max(0, cited.start - 12)
    return any(m.start() <= at + len(cited.text) and at <= m.end() for m in _RANGE.finditer(window))


def _future_clauses(norm: str, spans: list[tuple[int, int]]) -> set[int]:
    cues = [*_data()["future"]["en"], *_data()["future"]["zh"]]
    ends = [end for _, end in spans]
    return {bisect_right(ends, hit.start) for hit in find(norm, cues)}


def parse_answer(text: str, subjects: Mapping[str, list[str]], question: str | None = None) -> ParsedAnswer:
    """`text` as claims, left to right: its numbers and, when `question` is given (the physician's message,
    whose words are no conclusion of the answer), its conclusions. Linear in the text: one name search, one
    search per cue list."""
    norm = normalize(text)
    spans = clauses(norm)
    named = named_in(norm, subjects)
    numbers = _numbers(text, norm, spans, named)
    found: list[ConclusionClaim] = [] if question is None else conclusion_claims(norm, question, spans, named)
    return ParsedAnswer(numbers, found)


def parse_claims(text: str, subjects: Mapping[str, list[str]]) -> list[Claim]:
    """Every number of `text` as a claim, left to right."""
    return parse_answer(text, subjects).claims


def _numbers(text: str, norm: str, spans: list[tuple[int, int]], named: Named) -> list[Claim]:
    future = _future_clauses(norm, spans)
    out: list[Claim] = []
    clause_index = 0
    for cited in cited_numbers(text):
        if _inside_unit(norm, cited) or _date_part(norm, cited) or named.inside(cited.start):
            continue
        while spans[clause_index][1] <= cited.start and clause_index < len(spans) - 1:
            clause_index += 1
        start, end = spans[clause_index]
        subject = _subject(named, start, end, cited)
        bound = (is_threshold(text, cited, norm) or not any(ch.isdigit() for ch in cited.text)
                 or _in_range(norm, cited))
        out.append(Claim(subject, cited.value, cited.unit, _unit_unknown(norm, cited), cited, (start, end),
                         clause_index in future, bound, norm[start:end].rstrip().endswith(("?", "？"))))
    return out


def _takes(cited: Cited) -> tuple[bool, bool]:
    """Whether a drug may take the number (a dose unit written), and whether a result may (anything else):
    "potassium chloride 20 mEq" is about the drug, "2.1 before the furosemide to 1.9 mg/dL" about the lab
    named before the drug. Asked once per number, whatever the names it could be about."""
    doses, results = _dose_units()
    dose = cited.unit in doses
    return dose, not dose or cited.unit in results


@cache
def _dose_units() -> tuple[frozenset[str], frozenset[str]]:
    """The units of a dose, and those of them a result may take too (mmol): asked once per name a number
    could be about."""
    return frozenset(_data()["dose_units"]), frozenset(_data()["result_dose_units"])


def _subject(named: Named, start: int, end: int, cited: Cited) -> str | None:
    """The nearest fitting name before the number in its clause, else the first after it when the number has
    a unit or the name follows right after it."""
    stop = cited.start + len(cited.text)
    dose, result = _takes(cited)

    def fits(key: str) -> bool:
        return dose if key.startswith("drug:") else result

    for hit in named.nearest_before(cited.start, start):
        key = named.first_key(hit, fits)
        if key is not None:
            return key
    after = named.after(stop, end)
    if after is not None and (cited.unit is not None or after.start - stop <= 2):
        return named.first_key(after, fits)
    return None


def subject_hits(text: str, names: list[str]) -> list[Hit]:
    """Where the answer names a subject (any of `names`)."""
    return find(normalize(text), names)
