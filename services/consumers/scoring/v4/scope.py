"""Scope by sentence (scorer v4): which conclusion claims speak to the question.

v3's cues (the question's words out, hedges and negation, each cue attributed to the nearest subject) are
kept, then a claim is dropped when its sentence is a conditional offer ("if you want I can order…",
"如需我可以…") or a statement about orders other than the one asked ("I haven't placed any new orders",
"其他医嘱保持不变"): neither is a verdict. A claim that names no subject answers only from the answer's
first sentence. The cues are data (data/reading.json `scope`).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import cache

from services.consumers.scoring.lexicon import claims as data
from services.consumers.scoring.text import find, normalize
from services.consumers.scoring.v3.claim_model import ConclusionClaim
from services.consumers.scoring.v3.cues import _COMMA, _blanked, _subject
from services.consumers.scoring.v3.names import Named
from services.consumers.scoring.v4.reading import reading

_WORD_NEXT = re.compile(r" +[a-z\u4e00-\u9fff]")
_SENTENCE = re.compile(r"(?:[^.!?。！？\n]|\.(?=\d))*[.!?。！？\n]?")  # "1.5" ends no sentence
_EN_WORD = re.compile(r"[a-z]+")
_CJK = re.compile(r"[\u4e00-\u9fff]")


@cache
def _cues(name: str) -> re.Pattern[str]:
    group = reading()["scope"][name]
    alts = []
    for cue in sorted({*group["en"], *group["zh"]}, key=len, reverse=True):
        esc = re.escape(cue)
        alts.append(rf"(?<![a-z]){esc}(?![a-z])" if cue[:1].isascii() else esc)
    return re.compile("|".join(alts))


def out_of_scope(norm: str) -> list[tuple[int, int]]:
    """The stretches of the normalised answer that draw no conclusion: a sentence holding an offer, and a
    statement about other orders from the start of its clause to its sentence's end."""
    out = []
    for m in _SENTENCE.finditer(norm):
        sentence = m.group()
        if not sentence:
            continue
        if _cues("offers").search(sentence):
            out.append(m.span())
        elif other := _cues("other_orders").search(sentence):
            out.append(_bracket(sentence, other.start(), m.start()) or m.span())
    return out


def _bracket(sentence: str, at: int, offset: int) -> tuple[int, int] | None:
    """The bracket holding position `at` of the sentence, if any ("… (and I haven't placed any other
    orders)" silences the aside, not the verdict before it)."""
    opened = max(sentence.rfind("(", 0, at), sentence.rfind("（", 0, at))
    if opened < 0 or max(sentence.rfind(")", 0, at), sentence.rfind("）", 0, at)) > opened:
        return None
    closes = [i for i in (sentence.find(")", at), sentence.find("）", at)) if i >= 0]
    return offset + opened, offset + (min(closes) + 1 if closes else len(sentence))


def _bare(norm: str, claim: ConclusionClaim) -> bool:
    """Is the claim's sentence its cue alone ("Stable.", "No.", "不需要。")?"""
    start, end = _sentence_of(norm, claim.start)
    rest = norm[start:end].replace(claim.cue, " ", 1)
    least = reading()["scope"]["bare_words"]
    return len(_EN_WORD.findall(rest)) < least["en"] and len(_CJK.findall(rest)) < least["zh"]


def extra_verdicts(norm: str, question: str, found: list[ConclusionClaim], named: Named,
                   spans: list[tuple[int, int]]) -> list[ConclusionClaim]:
    """`found` with v4's verdict phrases (data/reading.json `verdicts`) added where no claim of v3 stands,
    each attributed to a subject as v3 attributes its cues."""
    text = _blanked(norm, normalize(question), data()["echo_min_words"], data()["echo_min_chars_zh"])
    commas = [m.start() for m in _COMMA.finditer(norm)]
    ends = [end for _, end in spans]
    taken = {c.start for c in found}
    out = list(found)
    for label, cues in reading()["verdicts"].items():
        for hit in find(text, [*cues["en"], *cues["zh"]]):
            if hit.start in taken or hit.negated:
                continue
            clause = spans[min(bisect_right(ends, hit.start), len(spans) - 1)]
            out.append(ConclusionClaim(_subject(norm, hit, clause, named, commas), None, label, hit.cue,
                                       hit.start, clause))
    return sorted(out, key=lambda c: c.start)


def in_scope(found: list[ConclusionClaim], norm: str) -> list[ConclusionClaim]:
    """The claims that answer: none from an offer or a statement about other orders, and a claim naming no
    subject only in one sentence: the first holding one that is the answer's first sentence ("No — the
    potassium is 4.1", "It is rising.") or says more than its cue ("未超过一年，因此不需要重新检查"). A
    bare "Stable. No." tacked on after the answer answers nothing; a "建议复查" after the verdict is
    commentary. A weak cue ("it is") is a verdict only when punctuation or the end follows it."""
    spans = out_of_scope(norm)
    first = next((m.end() for m in _SENTENCE.finditer(norm) if m.group().strip()), len(norm))
    determiners = set(reading()["scope"]["determiners"]["en"])
    weak = set(reading()["scope"]["weak"]["en"])
    kept = [c for c in found if not any(start <= c.start < end for start, end in spans)
            and not (c.cue in determiners and _WORD_NEXT.match(norm, c.start + len(c.cue))
                     and not _opens_sentence(norm, c.start))
            and not (c.cue in weak and _WORD_NEXT.match(norm, c.start + len(c.cue)))]
    verdict = next((c for c in kept if c.subject is None and (c.start < first or not _bare(norm, c))), None)
    sentence = _sentence_of(norm, verdict.start) if verdict else None
    return [c for c in kept if c.subject is not None or (sentence and sentence[0] <= c.start < sentence[1])]


def _sentence_of(norm: str, at: int) -> tuple[int, int]:
    return next((m.span() for m in _SENTENCE.finditer(norm) if m.start() <= at < max(m.end(), m.start() + 1)),
                (at, at + 1))


def _opens_sentence(norm: str, at: int) -> bool:
    """"No change: …", "No new order: …" open their sentence with the verdict; "there is no A1c" does not."""
    head = norm[max(0, at - 40):at]
    before = head.rstrip(" -*•\t")
    return not before or before.endswith((".", "!", "?", "\n", ":", "。"))
