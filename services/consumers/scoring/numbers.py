"""Numbers cited in free text, with the unit written after them: "1.2", "1.20", "1,200", "1.2 mg/dL",
"肌酐1.2毫克/分升", full-width "１．２", "7.0mmol/L", and counts in words ("twice", "三次").

A range "1.2-1.5" is two numbers (never a negative second one); dates and times (2150-03-01, 08:00) are not
numbers an answer cites as values and are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from services.consumers.scoring.lexicon import lexicon
from services.consumers.scoring.text import normalize
from services.consumers.scoring.units import canonical_unit

_DATE = re.compile(
    r"\d{4}-\d{1,2}-\d{1,2}(?:[t ]\d{1,2}:\d{2}(?::\d{2})?)?"  # 2150-03-01, 2150-03-01t08:00
    r"|\d{1,2}:\d{2}(?::\d{2})?"  # 08:00
    r"|\d{4}年\d{1,2}月(?:\d{1,2}日)?|\d{1,2}月\d{1,2}日"  # 2150年3月1日, 2月28日
)
_NUMBER = re.compile(r"(?<![a-z0-9_.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\d])|(?<![a-z0-9_.])\.\d+")
_UNIT = re.compile(r"\s*((?:[a-zµ%×x*^/0-9+]|[\u3400-\u9fff/]){1,14})")


@dataclass(frozen=True)
class Cited:
    value: float
    decimals: int  # digits after the point as written ("1.20" -> 2)
    unit: str | None  # canonical unit written right after the number, if recognised
    text: str
    start: int


@lru_cache(maxsize=256)
def _cited(text: str) -> tuple[Cited, ...]:
    return tuple(_parse(text))


def cited_numbers(text: str) -> list[Cited]:
    """Every number in `text` with its unit, left to right (parsed once per text: several checks ask)."""
    return list(_cited(text))


def _parse(text: str) -> list[Cited]:
    norm = normalize(text)
    blanked = _DATE.sub(lambda m: " " * len(m.group()), norm)
    out: list[Cited] = []
    for match in _NUMBER.finditer(blanked):
        raw = match.group()
        digits = raw.replace(",", "")
        value = float(digits)
        decimals = len(digits.split(".")[1]) if "." in digits else 0
        out.append(Cited(value, decimals, _unit_after(blanked, match.end()), raw, match.start()))
    out.extend(_number_words(norm))
    return sorted(out, key=lambda c: c.start)


def _unit_after(text: str, end: int) -> str | None:
    """The longest prefix of what follows the number that is a known unit spelling."""
    match = _UNIT.match(text, end)
    if not match:
        return None
    candidate = match.group(1)
    for length in range(len(candidate), 0, -1):
        unit = canonical_unit(candidate[:length])
        if unit is not None and (length == len(candidate) or not candidate[length].isalpha()
                                 or not candidate[length - 1].isalpha()):
            return unit
    return None


def _number_words(text: str) -> list[Cited]:
    """Counts written as words: EN on word boundaries, ZH numerals followed by a measure word."""
    words = lexicon()["number_words"]
    found: list[Cited] = []
    for match in _en_number_words().finditer(text):
        word = match.group()
        found.append(Cited(float(words["en"][word]), 0, None, word, match.start()))
    for match in re.finditer(r"([零一二两三四五六七八九十]{1,3})(?=次|个|项|种|天|日|周|片|粒)", text):
        value = _zh_numeral(match.group(1), words["zh"])
        if value is not None:
            found.append(Cited(float(value), 0, None, match.group(1), match.start()))
    return found


@lru_cache(maxsize=1)
def _en_number_words() -> re.Pattern[str]:
    names = sorted(lexicon()["number_words"]["en"], key=len, reverse=True)
    return re.compile(r"(?<![a-z])(?:" + "|".join(map(re.escape, names)) + r")(?![a-z])")


def _zh_numeral(text: str, digits: dict[str, int]) -> int | None:
    """一..九十九: "十" = 10, "十二" = 12, "二十" = 20, "二十三" = 23."""
    if "十" not in text:
        return digits.get(text) if len(text) == 1 else None
    tens, _, ones = text.partition("十")
    value = (digits.get(tens, 0) if tens else 1) * 10 + (digits.get(ones, 0) if ones else 0)
    return value


@lru_cache(maxsize=1)
def _bound_before() -> re.Pattern[str]:
    """One pattern for every EN cue that makes the number after it a bound (ending the words before it)."""
    cues = sorted(lexicon()["thresholds"]["before"]["en"], key=len, reverse=True)
    return re.compile(r"(?:" + "|".join(rf"(?<![a-z]){re.escape(cue)}" for cue in cues) + r")$")


_GLUED = re.compile(r"-([a-z]+)")
_EN_TOKEN = re.compile(r"[a-z]+|[<>≤≥]=?")
_UNIT_HEAD = re.compile(r"\s*[a-zµ/%]*\s*")  # matched at the number's end (no ^: a match from a position)
_BLANKS = re.compile(r"\s*")
_LETTERS = re.compile(r"[a-z]+")


def _last_tokens(before: str, n: int) -> list[str]:
    """The last `n` (>= 1) EN tokens of `before`, as a search of all of it gives them: read from a short
    tail first (every token of a tail but its first is whole), the whole window only when the tail holds
    too few. Every number of a long answer asks this: the whole 160 characters each time cost a third of
    reading a dense answer."""
    tail = before[-48:]
    tokens = _EN_TOKEN.findall(tail)
    if len(tokens) > n or len(tail) == len(before):
        return tokens[-n:]
    return _EN_TOKEN.findall(before)[-n:]


@lru_cache(maxsize=4096)
def _bound_before_in(words: str) -> bool:
    """Do the last EN words before a number end with a bound's cue? (The same few words precede many
    numbers of an answer: each is searched once.)"""
    return _bound_before().search(words) is not None


def is_threshold(text: str, cited: Cited, norm: str | None = None) -> bool:
    """Whether `cited` (found in `text` by cited_numbers) is not a value but a bound the answer compares with
    ("below 3.5", "3.5以上") or a count ("4 results", "24 hours", "2次"), by the cues of data/lexicon.json."""
    norm = normalize(text) if norm is None else norm  # `norm`: normalize(text) already, for long answers
    end = cited.start + len(cited.text)
    zh_cues, after_cues, counts_en, counts_zh = _threshold_cues()
    glued = _GLUED.match(norm, end, end + 160)  # "24-hour", "3-day": a count joined to what it counts
    if glued and glued.group(1) in counts_en:
        return True
    en_window, zh_window = _windows()
    before = norm[max(0, cited.start - 160):cited.start]  # windows are shorter
    if _bound_before_in(" ".join(_last_tokens(before, en_window))):
        return True
    if before.rstrip()[-zh_window:].endswith(zh_cues):
        return True
    # what follows the number past its unit ("3.5 mg/dL or less"), or past the blanks after it
    head = (_UNIT_HEAD if not norm[end:end + 1].isspace() else _BLANKS).match(norm, end, end + 160)
    tail = norm[head.end():min(head.end() + 16, end + 160)]  # type: ignore[union-attr]
    if tail.startswith(after_cues):
        return True
    counted = _LETTERS.match(tail)
    return (counted is not None and counted.group() in counts_en) or tail.startswith(counts_zh)


@lru_cache(maxsize=1)
def _windows() -> tuple[int, int]:
    """How many EN words, and ZH characters, before a number its bound cues are looked for in."""
    window = lexicon()["thresholds"]["window"]
    return window["en"], window["zh"]


@lru_cache(maxsize=1)
def _threshold_cues() -> tuple[tuple[str, ...], tuple[str, ...], frozenset[str], tuple[str, ...]]:
    """The threshold cues as is_threshold asks them: ZH before, after (EN and ZH), EN and ZH counts after."""
    cues = lexicon()["thresholds"]
    return (tuple(cues["before"]["zh"]), tuple(cues["after"]["en"] + cues["after"]["zh"]),
            frozenset(cues["counts_after"]["en"]), tuple(cues["counts_after"]["zh"]))
