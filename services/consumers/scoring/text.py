"""Finding cue phrases in an answer, EN and ZH, with negation: the text primitives the checks share.

EN cues match on word boundaries, ZH cues as substrings (Chinese has no spaces). Text is NFKC-normalised
first, so full-width digits and punctuation (１．２、？) read as their ASCII forms.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cache, lru_cache

from services.consumers.scoring.lexicon import lexicon

_CJK = re.compile(r"[\u3400-\u9fff]")
_WORD = re.compile(r"[A-Za-z0-9']+|[\u3400-\u9fff]")


def normalize(text: str) -> str:
    """NFKC, lower case, µ/μ unified, curly apostrophes straightened."""
    text = unicodedata.normalize("NFKC", text or "").replace("\u2019", "'").replace("\u03bc", "\u00b5")
    return text.lower()


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


@dataclass(frozen=True)
class Hit:
    cue: str
    start: int
    end: int
    negated: bool


@cache
def _pattern(cue: str) -> re.Pattern[str]:
    escaped = re.escape(cue)
    if has_cjk(cue):
        return re.compile(escaped)
    left = r"(?<![a-z0-9])" if cue[:1].isalnum() else ""
    right = r"(?![a-z0-9])" if cue[-1:].isalnum() else ""
    return re.compile(left + escaped + right)


def _negated(text: str, start: int, language: str) -> bool:
    """A negation cue shortly before `start` (EN: within the window's words; ZH: within its characters)."""
    lex = lexicon()
    window = lex["negation_window"][language]
    if language == "zh":
        before = text[max(0, start - window):start]
        return any(cue in before for cue in lex["negation"]["zh"])
    words = _WORD.findall(re.split(r"[.;:!?\n,]", text[max(0, start - 200):start])[-1])[-window:]
    return any(word in _en_negations() or word.endswith("n't") for word in words)


@cache
def _en_negations() -> frozenset[str]:
    return frozenset(lexicon()["negation"]["en"])


@lru_cache(maxsize=4096)
def _longest_first(cues: tuple[str, ...]) -> tuple[str, ...]:
    """The distinct lower-cased cues, longest first: the checks ask with the same lists turn after turn."""
    return tuple(sorted({c.lower() for c in cues if c}, key=len, reverse=True))


def find(text: str, cues: list[str], language: str | None = None) -> list[Hit]:
    """Non-overlapping hits of `cues` in `text` (already normalised), longest cue first at a position.

    A cue that is not a substring of the text cannot match its pattern (the escaped cue between
    look-arounds): a substring test rules most cues out before any regular expression runs."""
    language = language or ("zh" if has_cjk(text) else "en")
    taken = bytearray(len(text))  # characters already inside a (longer) hit: linear in the text
    hits: list[Hit] = []
    for cue in _longest_first(tuple(cues)):
        if cue not in text:
            continue
        for match in _pattern(cue).finditer(text):
            start, end = match.span()
            if any(taken[start:end]):
                continue
            taken[start:end] = b"\x01" * (end - start)
            lang = "zh" if has_cjk(cue) else "en"
            hits.append(Hit(cue, start, end, _negated(text, start, lang if language == "zh" else lang)))
    return sorted(hits, key=lambda hit: hit.start)


def mentions(text: str, terms: list[str]) -> list[Hit]:
    """Where any of `terms` occurs (negated or not)."""
    return find(normalize(text), terms)


def near(text: str, hit: Hit, cues: list[str], before: int, after: int) -> str | None:
    """The first of `cues` within `before`/`after` words (EN) or characters (ZH) around `hit`, if any."""
    if has_cjk(hit.cue):
        span = text[max(0, hit.start - before):hit.start] + " " + text[hit.end:hit.end + after]
    else:
        head = re.split(r"[.;!?\n]", text[:hit.start])[-1]
        tail = re.split(r"[.;!?\n]", text[hit.end:])[0]
        span = " ".join(_WORD.findall(head)[-before:]) + " | " + " ".join(_WORD.findall(tail)[:after])
        head_cjk = text[max(0, hit.start - before * 2):hit.start]
        span += " " + head_cjk if has_cjk(head_cjk) else ""
    for cue in sorted(cues, key=len, reverse=True):
        if cue == "n't" and re.search(r"[a-z]n't", span):
            return cue
        if _pattern(cue.lower()).search(span):
            return cue
    return None
