"""Conclusions (v3): the answer's verdict on a yes/no or up/down/unchanged question.

Before cues are read, the question's own words are taken out of the answer (runs of at least
`echo_min_words` words, or `echo_min_chars_zh` characters, that copy the physician's message; and every
sentence of the answer that is itself a question), so an answer that echoes "going up, going down or
stable?" concludes nothing. A cue right after a hedge ("may", "可能") is a possibility, not a conclusion. A
negated yes is a no; other negated cues say nothing. The answer passes only if it concludes the expected
label and none that contradicts it (conflicting cues fail: "可能升高也可能正常"). Cue matching is on word
boundaries in EN ("normal" is not in "abnormal") and substrings in ZH, with negation (text.py).
"""

from __future__ import annotations

import re

from contracts.languages import LANGUAGES
from services.consumers.scoring.lexicon import claims as _data
from services.consumers.scoring.lexicon import lexicon
from services.consumers.scoring.text import find, has_cjk, normalize

_WORD = re.compile(r"[a-z0-9']+")
# a clause and the mark that ends it: one match per clause, so a long answer without a "?" is read once (the
# pattern "clause then ?" was retried from every position of such a run, quadratic in its length)
_CLAUSE = re.compile(r"[^.!?。！？\n]*[.!?。！？\n]?")


def verdict_alias(value: str) -> str | None:
    low = value.lower()
    return lexicon()["decision_aliases"].get(low) or _data()["verdict_aliases"].get(low)


def without_question(answer: str, question: str, words: int | None = None,
                     chars_zh: int | None = None) -> str:
    """`answer` (normalised) with the runs that copy `question` and its own questions blanked."""
    norm = normalize(answer)
    chars = list(_CLAUSE.sub(lambda m: " " * len(m.group()) if m.group().endswith(("?", "？")) else m.group(),
                             norm))
    q = normalize(question)
    n = words or _data()["echo_min_words"]
    q_words = _WORD.findall(q)
    grams = {tuple(q_words[i:i + n]) for i in range(len(q_words) - n + 1)}
    words = list(_WORD.finditer(norm))
    for i in range(len(words) - n + 1):
        if tuple(w.group() for w in words[i:i + n]) in grams:
            for j in range(words[i].start(), words[i + n - 1].end()):
                chars[j] = " "
    k = chars_zh or _data()["echo_min_chars_zh"]
    zh_grams = {q[i:i + k] for i in range(len(q) - k + 1) if has_cjk(q[i:i + k])}
    for i in range(len(norm) - k + 1):
        if norm[i:i + k] in zh_grams:
            chars[i:i + k] = [" "] * k
    return "".join(chars)


def _hedged(text: str, start: int, zh: bool) -> bool:
    hedges = _data()["hedges"]
    window = _data()["hedge_window"]["zh" if zh else "en"]
    if zh:
        return any(h in text[max(0, start - window):start] for h in hedges["zh"])
    words = _WORD.findall(re.split(r"[.;:!?\n,]", text[:start][-200:])[-1])[-window:]
    return any(w in hedges["en"] for w in words)


def concluded(answer: str, question: str, labels: tuple[str, ...]) -> list[tuple[int, str]]:
    """(position, label) of every conclusion cue left after the question and hedges are taken out."""
    text = without_question(answer, question)
    cues = lexicon()["conclusion"]
    found: list[tuple[int, str]] = []
    for label in labels:
        for hit in find(text, [c for lang in LANGUAGES for c in cues[label][lang]]):
            if _hedged(text, hit.start, has_cjk(hit.cue)):
                continue
            if not hit.negated:
                found.append((hit.start, label))
            elif label == "yes":
                found.append((hit.start, "no"))
    return sorted(found)


def conclusion(answer: str, expected: str, question: str = "") -> tuple[bool, str]:
    group = ("yes", "no") if expected in ("yes", "no") else ("up", "down", "unchanged")
    if expected not in group:
        return False, f"unknown conclusion {expected!r}"
    seen = list(dict.fromkeys(label for _, label in concluded(answer, question, group)))
    opposite = [label for label in seen if label in lexicon()["contradicts"][expected]]
    if expected not in seen:
        return False, f"no {expected} conclusion (found {', '.join(seen) or 'nothing'})"
    if opposite:
        return False, f"conflicting conclusions: {', '.join(seen)} (expected {expected})"
    return True, f"concludes {expected}"
