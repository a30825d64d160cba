"""The tokens of clinical prose that are NOT result claims, EN and ZH (scorer v4).

`rewrite` first puts the answer in one spelling: superscripts as ^digits (NFKC would read ×10⁹/L as ×109/L),
scientific and count units ("×10^9/L", "×10⁹/L", "K/µL", "thou/uL") as the one the unit table knows, and the
chart's case-sensitive abbreviations (Cr, K, Mg, Hgb, phos, HCO3, Glu, Lac, 钾离子 …) as the lab's name, so
"Mg 1.8" names magnesium while "2 mg" stays a unit. `Spans` then marks, on the normalised text, the dates
(ISO, M/D, 月日, "Feb 28"), times (08:00, 8 am, 下午5点42分), list markers and identifiers; a number inside
one is no claim, and a date next to a number dates it. `number_class` says what a number is when it is not a
result: a delta ("up 0.3", "+0.3", "上升了0.3"), a ratio, a duration ("48 hours", "3天"), a dose, an MIC, a
count ("13 results", "共13次") — by the cues of data/reading.json around it.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from dataclasses import dataclass
from functools import cache, lru_cache

from services.consumers.scoring.text import normalize
from services.consumers.scoring.v4.reading import compiled, reading, span_patterns

_WORD = re.compile(r"[a-z]+|[+Δδ]|->|→")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


def rewrite(text: str) -> str:
    """The answer in one spelling (see the module): what every other step of v4 reads."""
    text = _superscripts().sub(lambda m: "^" + "".join(reading()["superscripts"][ch] for ch in m.group()),
                               text or "")
    text = unicodedata.normalize("NFKC", text)
    for group in ("case_sensitive", "units"):
        pattern, targets = compiled(group)
        text = pattern.sub(lambda m, targets=targets: targets[int(m.lastgroup[1:])], text)  # type: ignore[index]
    return text


@cache
def _superscripts() -> re.Pattern[str]:
    return re.compile("[" + "".join(reading()["superscripts"]) + "]+")


@dataclass(frozen=True)
class Span:
    kind: str  # date | time | list_marker | identifier
    start: int
    end: int
    month_day: tuple[int, int] | None = None  # a date's month and day, when it says them


class Spans:
    """The non-result spans of one normalised text, in order (overlaps merged, the first kind kept)."""

    def __init__(self, norm: str) -> None:
        found: list[Span] = []
        for kind, pattern in span_patterns():
            for m in pattern.finditer(norm):
                day = _month_day(m.group()) if kind == "date" else None
                found.append(Span(kind, m.start(), m.end(), day))
        found.sort(key=lambda s: (s.start, -s.end))
        merged: list[Span] = []
        for span in found:
            if merged and span.start < merged[-1].end:
                continue
            merged.append(span)
        self.spans = merged
        self.starts = [s.start for s in merged]

    def at(self, pos: int) -> Span | None:
        """The span covering `pos`, if any."""
        i = bisect_right(self.starts, pos) - 1
        return self.spans[i] if i >= 0 and self.spans[i].end > pos else None

    def dates_between(self, start: int, end: int) -> list[Span]:
        i = bisect_right(self.starts, start - 1)
        out = []
        while i < len(self.spans) and self.spans[i].start < end:
            if self.spans[i].kind == "date":
                out.append(self.spans[i])
            i += 1
        return out


def _month_day(text: str) -> tuple[int, int] | None:
    text = text.strip()
    if m := re.match(r"\d{4}-(\d{1,2})-(\d{1,2})", text):
        return int(m.group(1)), int(m.group(2))
    if m := re.match(r"(\d{1,2})/(\d{1,2})", text):
        first, second = int(m.group(1)), int(m.group(2))
        return (second, first) if first > 12 >= second else (first, second)  # D/M: "17/08" is August 17
    if m := re.search(r"(\d{1,2})月(\d{1,2})", text):
        return int(m.group(1)), int(m.group(2))
    low = text.lower()
    month = next((i + 1 for i, name in enumerate(_MONTHS) if name in low), None)
    day = re.search(r"\d{1,2}(?!\d)", re.sub(r"\d{4}", "", low))
    return (month, int(day.group())) if month and day else None


@dataclass(frozen=True)
class _Class:
    """One class's cues, compiled: EN words before the number (anywhere in the window, or ending it), ZH
    text right before it, the word or text right after it."""

    before_any: re.Pattern[str] | None
    before_end: re.Pattern[str] | None
    zh_end: tuple[str, ...]
    zh_in: re.Pattern[str] | None  # any of the cues anywhere in the text right before the number
    after: frozenset[str]
    zh_after: tuple[str, ...]


def _alternation(cues: list[str], end: bool) -> re.Pattern[str] | None:
    if not cues:
        return None
    alts = "|".join(re.escape(c) for c in sorted(cues, key=len, reverse=True))
    return re.compile(rf"(?:^| )(?:{alts})" + ("$" if end else "(?: |$)"))


def _anywhere(cues: tuple[str, ...]) -> re.Pattern[str] | None:
    return re.compile("|".join(re.escape(c) for c in cues)) if cues else None


@cache
def _units(name: str, key: str) -> frozenset[str]:
    """A class's unit list as a set (asked for every number)."""
    return frozenset(reading()["classes"][name][key])


@cache
def _units_after(name: str) -> tuple[str, ...]:
    return tuple(reading()["classes"][name]["units_after"])


@cache
def _classes() -> dict[str, _Class]:
    out = {}
    for name, c in reading()["classes"].items():
        if not isinstance(c, dict):
            continue
        ends = name in ("delta",)
        zh = tuple(c.get("before_zh", []))
        out[name] = _Class(_alternation(c.get("before_en", []), False),
                           _alternation(c.get("before_en", []), True) if ends else None,
                           zh if name in ("delta", "ratio", "count") else (),
                           _anywhere(zh) if name in ("mic", "dose") else None,
                           frozenset(c.get("after_en", [])), tuple(c.get("after_zh", [])))
    return out


_HEAD = re.compile(r"[.;:!?\n,(（]")
_AFTER = re.compile(r"\s?(-?[a-z]+|[\u4e00-\u9fff]{1,3})")
_LETTERS = re.compile(r"[a-z]+")


def _before(norm: str, at: int) -> str:
    head = _HEAD.split(norm[max(0, at - 80):at])[-1]
    return " ".join(_WORD.findall(head)[-reading()["classes"]["window"]:])


@lru_cache(maxsize=4096)
def _cued_before(before: str) -> frozenset[str]:
    """The classes whose EN cue the words before a number hold (a delta's only where they end): the same
    few words precede many numbers of an answer ("creatinine", "up"), so each is searched once."""
    out = set()
    for name, cls in _classes().items():
        pattern = cls.before_end if name == "delta" else cls.before_any
        if pattern is not None and pattern.search(before):
            out.add(name)
    return frozenset(out)


def number_class(norm: str, start: int, end: int, unit: str | None) -> str:
    """"result" or what the number is instead (delta, ratio, duration, dose, mic, count), by its context."""
    c = _classes()
    before = _before(norm, start)
    tail = norm[end:end + 24]
    lead = tail.lstrip()
    after_word = _AFTER.match(tail)
    after = after_word.group(1) if after_word else ""
    zh_before = norm[max(0, start - 6):start].rstrip()
    if suffix_subject(lead) is not None:  # "86 years old": a result named after its value
        return "result"
    glyph = norm[max(0, start - 1):start]
    if glyph in ("×", "x", "*") and unit is None:  # "2.2 ×3": how many times
        return "count"
    cued = _cued_before(before)
    if glyph in ("+", "Δ", "δ", "±") or "delta" in cued \
            or zh_before.endswith(c["delta"].zh_end) or _beyond_limit().match(norm, end, end + 48):  # type: ignore[union-attr]
        return "delta"
    mic = c["mic"]
    if "mic" in cued or (mic.zh_in is not None and mic.zh_in.search(zh_before)) \
            or lead.startswith(_units_after("mic")):
        return "mic"
    ratio = c["ratio"]
    if "ratio" in cued or after in ratio.after or zh_before.endswith(ratio.zh_end) \
            or lead.startswith(ratio.zh_after):  # type: ignore[union-attr]
        return "ratio"
    if unit is None and (after in c["duration"].after or lead.startswith(c["duration"].zh_after)):
        return "duration"
    if unit == "%" and _strength(norm, start, end):
        return "dose"
    dose = c["dose"]
    if unit in _units("dose", "units") and unit != "mmol" and ("dose" in cued or after in dose.after or (
            dose.zh_in is not None and dose.zh_in.search(zh_before))):
        return "dose"
    if unit is None and (after in _tablets() or lead.startswith(dose.zh_after[:4])):
        return "dose"
    count = c["count"]
    if unit is None and "." not in norm[start:end] and not count.after.isdisjoint(_LETTERS.findall(tail)[:3]):
        return "count"
    if unit is None and (lead.startswith(count.zh_after) or "count" in cued
                         or zh_before.endswith(count.zh_end)):
        return "count"
    return "result"


def suffix_subject(lead: str) -> str | None:
    """The subject a number names by the words right after it ("86 years old", "86岁": age), if any."""
    m = _suffixes()[0].match(lead)
    return _suffixes()[1][m.group()] if m else None


@cache
def _suffixes() -> tuple[re.Pattern[str], dict[str, str]]:
    subject_of = {s: subject for subject, ss in reading()["suffix_subjects"].items() for s in ss}
    alts = [re.escape(s) + (r"(?![a-z])" if s.isascii() else "")
            for s in sorted(subject_of, key=len, reverse=True)]
    return re.compile("|".join(alts)), subject_of


def _strength(norm: str, start: int, end: int) -> bool:
    """A percentage beside a preparation's name is its strength ("NaCl 0.9% flush", "50% 葡萄糖")."""
    words = reading()["classes"]["strength"]
    after = norm[end:end + 20].lstrip(" %").lstrip()
    before = norm[max(0, start - 20):start].rstrip()
    return any(after.startswith(w) and not (w.isascii() and after[len(w):][:1].isalpha())
               for w in words["after"]) or any(
        before.endswith(w) and not (w.isascii() and before[:-len(w)][-1:].isalpha()) for w in words["before"])


@cache
def _beyond_limit() -> re.Pattern[str]:
    """A distance to a limit right after the number and its unit ("0.3 k/ul above the lower limit")."""
    phrases = "|".join(re.escape(p) for p in reading()["classes"]["delta"]["after_phrases"])
    return re.compile(rf"\s*(?:[^\s,;]+\s*)?(?:{phrases})")


@cache
def _tablets() -> frozenset[str]:
    """What a bare number is a dose of ("2 tablets")."""
    return frozenset(reading()["classes"]["dose"]["after_en"][:8])


__all__ = ["Span", "Spans", "normalize", "number_class", "rewrite", "suffix_subject"]
