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
from functools import cache

from services.consumers.scoring.text import normalize
from services.consumers.scoring.v4.reading import compiled, reading, span_patterns

_WORD = re.compile(r"[a-z]+|[+Δδ]|->|→")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


def rewrite(text: str) -> str:
    """The answer in one spelling (see the module): what every other step of v4 reads."""
    text = _superscripts().sub(lambda m: "^" + "".join(reading()["superscripts"][ch] for ch in m.group()),
                               text or "")
    text = unicodedata.normalize("NFKC", text)
    for pattern, to in compiled("case_sensitive"):
        text = pattern.sub(to, text)
    for pattern, to in compiled("units"):
        text = pattern.sub(to, text)
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
            if self.spans[i].kind == "date" and self.spans[i].end <= end:
                out.append(self.spans[i])
            i += 1
        return out


def _month_day(text: str) -> tuple[int, int] | None:
    text = text.strip()
    if m := re.match(r"\d{4}-(\d{1,2})-(\d{1,2})", text):
        return int(m.group(1)), int(m.group(2))
    if m := re.match(r"(\d{1,2})/(\d{1,2})", text):
        return int(m.group(1)), int(m.group(2))
    if m := re.search(r"(\d{1,2})月(\d{1,2})", text):
        return int(m.group(1)), int(m.group(2))
    low = text.lower()
    month = next((i + 1 for i, name in enumerate(_MONTHS) if name in low), None)
    day = re.search(r"\d{1,2}(?!\d)", re.sub(r"\d{4}", "", low))
    return (month, int(day.group())) if month and day else None


@cache
def _classes() -> dict:
    return reading()["classes"]


def _words_before(norm: str, at: int, n: int) -> list[str]:
    head = re.split(r"[.;:!?\n,(（]", norm[max(0, at - 120):at])[-1]
    return _WORD.findall(head)[-n:]


def _has_cue(words: list[str], cues: list[str]) -> bool:
    joined = " " + " ".join(words) + " "
    return any(f" {cue} " in joined for cue in cues)


def number_class(norm: str, start: int, end: int, unit: str | None) -> str:
    """"result" or what the number is instead (delta, ratio, duration, dose, mic, count), by its context."""
    c = _classes()
    window = c["window"]
    before = _words_before(norm, start, window)
    tail = norm[end:end + 24]
    after_word = re.match(r"\s?(-?[a-z]+|[\u4e00-\u9fff]{1,3})", tail)
    after = after_word.group(1) if after_word else ""
    zh_before = norm[max(0, start - 4):start]
    glyph = norm[max(0, start - 1):start]
    if glyph in ("+", "Δ", "δ", "±") or _ends_with(before, c["delta"]["before_en"]):
        return "delta"
    if any(zh_before.endswith(cue) for cue in c["delta"]["before_zh"]):
        return "delta"
    if _has_cue(before, c["mic"]["before_en"]) or any(cue in zh_before for cue in c["mic"]["before_zh"]) \
            or tail.lstrip().startswith(tuple(c["mic"]["units_after"])):
        return "mic"
    if _has_cue(before, c["ratio"]["before_en"]) or after in c["ratio"]["after_en"] \
            or any(zh_before.endswith(cue) for cue in c["ratio"]["before_zh"]) \
            or tail.lstrip().startswith(tuple(c["ratio"]["after_zh"])):
        return "ratio"
    if unit is None and (after in c["duration"]["after_en"]
                         or tail.lstrip().startswith(tuple(c["duration"]["after_zh"]))):
        return "duration"
    dosed = (_has_cue(before, c["dose"]["before_en"]) or after in c["dose"]["after_en"]
             or any(cue in zh_before for cue in c["dose"]["before_zh"]))
    if unit in c["dose"]["units"] and unit != "mmol" and dosed:
        return "dose"
    if unit is None and (after in c["dose"]["after_en"][:8]
                         or tail.lstrip().startswith(tuple(c["dose"]["after_zh"][:4]))):
        return "dose"
    following = re.findall(r"[a-z]+", tail)[:3]
    if unit is None and "." not in norm[start:end] and any(w in c["count"]["after_en"] for w in following):
        return "count"
    if unit is None and (after in c["count"]["after_en"]
                         or tail.lstrip().startswith(tuple(c["count"]["after_zh"]))
                         or _has_cue(before, c["count"]["before_en"])
                         or any(zh_before.endswith(cue) for cue in c["count"]["before_zh"])):
        return "count"
    return "result"


def _ends_with(words: list[str], cues: list[str]) -> bool:
    """The words right before a number end with one of `cues` ("up by", "rose"): "up to 1.8" and "trending
    up, now 1.8" do not."""
    tail = " " + " ".join(words)
    return any(tail.endswith(" " + cue) for cue in cues)


__all__ = ["Span", "Spans", "normalize", "number_class", "rewrite"]
