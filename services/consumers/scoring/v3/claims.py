"""An answer as claims: (subject, value, unit, time, span) for every number it states, in EN and ZH.

A claim's subject is the name nearest before the number in its clause (else, for a number with a unit, the
first one after it): names come from `subject_names` (the scenario's facts, the builder's lab vocabulary,
the drugs of the record), and ONE search over all of them attributes each number, so "potassium chloride
20 mEq" is a claim about the drug, not about potassium. A token after a number that looks like a unit but is
none the parser knows ("3.4 mEq" against mEq/L is fine, "3.4 meqs" is not) makes the unit `unknown`; a
number inside a unit ("mL/min/1.73m²"), a name ("Dextrose 50%") or a date/time is no claim. `future` marks
a clause with a future cue ("will be", "next draw", "下次"). Thresholds ("below 3.5") and counts ("13
results") stay claims with `threshold`/`count_noun` set: the checks decide what each may satisfy.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from services.consumers.scoring.lexicon import claims as _data
from services.consumers.scoring.numbers import Cited, cited_numbers, is_threshold
from services.consumers.scoring.text import Hit, find, normalize

_CLAUSE_END = re.compile(r"[;!?\n。；！？]|\.(?!\d)")
_RANGE = re.compile(r"\d(?:\.\d+)?\s?[-–~～]\s?\d")
_TOKEN = re.compile(r"\s?([a-zµ%/\u4e00-\u9fff^0-9]{1,10})")


@dataclass(frozen=True)
class Claim:
    subject: str | None  # a key of the subject names, or None (a number about nothing named)
    value: float
    unit: str | None  # canonical unit, when a known one is written after the number
    unit_unknown: bool  # a unit-like token after the number that no spelling of data/units.json is
    cited: Cited
    clause: tuple[int, int]
    future: bool
    threshold: bool  # a bound or a count ("below 3.5", "24 hours", "13 results")
    in_question: bool  # the clause ends with a question mark: a question is not a claim of the answer

    @property
    def unitless(self) -> bool:
        return self.unit is None and not self.unit_unknown


def _clauses(norm: str) -> list[tuple[int, int]]:
    out, start = [], 0
    for match in _CLAUSE_END.finditer(norm):
        out.append((start, match.end()))
        start = match.end()
    out.append((start, len(norm)))
    return out


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
    months = _data()["months"]
    after = re.match(r"\s?([a-z]+)", norm[cited.start + len(cited.text):cited.start + len(cited.text) + 12])
    before = re.search(r"([a-z]+)\.?\s?$", norm[max(0, cited.start - 12):cited.start])
    return bool(after and after.group(1) in months) or bool(before and before.group(1) in months)


def _in_range(norm: str, cited: Cited) -> bool:
    """Either end of "4-11", "70–180": a range is a bound, not a result."""
    window = norm[max(0, cited.start - 12):cited.start + len(cited.text) + 12]
    at = cited.start - max(0, cited.start - 12)
    return any(m.start() <= at + len(cited.text) and at <= m.end() for m in _RANGE.finditer(window))


def _future_clauses(norm: str, clauses: list[tuple[int, int]]) -> set[int]:
    cues = [*_data()["future"]["en"], *_data()["future"]["zh"]]
    ends = [end for _, end in clauses]
    return {bisect_right(ends, hit.start) for hit in find(norm, cues)}


_ASCII = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_START = re.compile(r"(?<![a-z0-9])[a-z0-9]|[^\sa-z0-9]")


@lru_cache(maxsize=64)
def _names_index(names: tuple[str, ...]) -> dict[str, list[str]]:
    """First character -> the names starting with it, longest first."""
    index: dict[str, list[str]] = {}
    for name in sorted({n for n in names if n}, key=len, reverse=True):
        index.setdefault(name[0], []).append(name)
    return index


def _names_in(norm: str, names: tuple[str, ...]) -> list[Hit]:
    """Leftmost-longest, non-overlapping occurrences of `names` (EN on word boundaries, ZH as substrings):
    one pass over the word starts of the answer, whatever the number of names."""
    index = _names_index(names)
    hits: list[Hit] = []
    taken = 0
    for start in _START.finditer(norm):
        at = start.start()
        if at < taken:
            continue
        for name in index.get(norm[at], ()):
            end = at + len(name)
            if norm.startswith(name, at) and (name[-1] not in _ASCII or end >= len(norm)
                                              or norm[end] not in _ASCII):
                hits.append(Hit(name, at, end, False))
                taken = end
                break
    return hits


def _owners(subjects: Mapping[str, list[str]]) -> tuple[dict[str, list[str]], tuple[str, ...]]:
    """Lowercased name -> its subjects, and the names longest first; once per mapping (subject_names gives
    one mapping per scenario, so the turns of a run share it)."""
    cached = _OWNERS.get(id(subjects))
    if cached is not None and cached[0] is subjects:
        return cached[1], cached[2]
    owner: dict[str, list[str]] = {}
    for key, names in subjects.items():
        for name in names:
            owner.setdefault(name.lower(), []).append(key)
    ordered = tuple(sorted(owner, key=len, reverse=True))
    if len(_OWNERS) >= 256:
        _OWNERS.pop(next(iter(_OWNERS)))
    _OWNERS[id(subjects)] = (subjects, owner, ordered)  # the mapping is held: its id stays its own
    return owner, ordered


_OWNERS: dict[int, tuple[Mapping[str, list[str]], dict[str, list[str]], tuple[str, ...]]] = {}


def parse_claims(text: str, subjects: Mapping[str, list[str]]) -> list[Claim]:
    """Every number of `text` as a claim, left to right; linear in the text (one search per name list)."""
    norm = normalize(text)
    clauses = _clauses(norm)
    future = _future_clauses(norm, clauses)
    owner, ordered = _owners(subjects)
    hits = _names_in(norm, ordered)
    ends, starts = [h.end for h in hits], [h.start for h in hits]
    out: list[Claim] = []
    clause_index = 0
    for cited in cited_numbers(text):
        if _inside_unit(norm, cited) or _date_part(norm, cited) or _inside_name(hits, starts, cited):
            continue
        while clauses[clause_index][1] <= cited.start and clause_index < len(clauses) - 1:
            clause_index += 1
        start, end = clauses[clause_index]
        subject = _subject(hits, ends, starts, start, end, cited, owner)
        bound = (is_threshold(text, cited, norm) or not any(ch.isdigit() for ch in cited.text)
                 or _in_range(norm, cited))
        out.append(Claim(subject, cited.value, cited.unit, _unit_unknown(norm, cited), cited, (start, end),
                         clause_index in future, bound, norm[start:end].rstrip().endswith(("?", "？"))))
    return out


def _inside_name(hits: list[Hit], starts: list[int], cited: Cited) -> bool:
    """"0.9" of "Sodium Chloride 0.9% Flush", "12" of "B12": part of a name the answer uses, not a value."""
    at = bisect_right(starts, cited.start) - 1
    return at >= 0 and hits[at].end > cited.start


def _fits(key: str, cited: Cited) -> bool:
    """A drug takes doses (a dose unit written), a result takes anything else: "potassium chloride 20 mEq"
    is about the drug, "2.1 before the furosemide to 1.9 mg/dL" about the lab named before the drug."""
    dose = cited.unit in _data()["dose_units"]
    return dose if key.startswith("drug:") else not dose or cited.unit in _data()["result_dose_units"]


def _subject(hits: list[Hit], ends: list[int], starts: list[int], start: int, end: int, cited: Cited,
             owner: Mapping[str, list[str]]) -> str | None:
    """Hits are sorted and never overlap, so their ends are sorted too: bisect, not a scan per number."""
    stop = cited.start + len(cited.text)
    last = bisect_right(ends, cited.start)
    before = []
    for i in range(last - 1, -1, -1):
        if hits[i].start < start or len(before) >= 4:
            break
        before.insert(0, hits[i])
    nxt = bisect_left(starts, stop)
    after = hits[nxt] if nxt < len(hits) and hits[nxt].start < end else None
    for hit in reversed(before):
        key = next((k for k in owner[hit.cue] if _fits(k, cited)), None)
        if key is not None:
            return key
    if after is not None and (cited.unit is not None or after.start - stop <= 2):
        return next((k for k in owner[after.cue] if _fits(k, cited)), None)
    return None


def subject_hits(text: str, names: list[str]) -> list[Hit]:
    """Where the answer names a subject (any of `names`)."""
    return find(normalize(text), names)
