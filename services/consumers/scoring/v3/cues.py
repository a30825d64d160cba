"""An answer's conclusions as claims (v3): every conclusion cue of the lexicon (data/lexicon.json
`conclusion`: yes/no verdicts, up/down/unchanged directions, EN and ZH) that is left once the question's own
words are taken out, attributed to a subject by the name search the numbers use (names.py).

- The question first: runs of at least `echo_min_words` words (`echo_min_chars_zh` characters) that copy
  the physician's message, and every sentence of the answer that is itself a question, are blanked before
  cues are read (`without_question`), so "going up, going down or stable?" echoed concludes nothing.
- A cue right after a hedge ("may", "可能", within `hedge_window`) is a possibility: no claim.
- A negated yes is a verdict "no"; every other negated cue ("not rising") is no claim. Cues match on word
  boundaries in EN ("normal" is not in "abnormal") and as substrings in ZH, with negation (text.py).
- Verdict and direction cues are read separately (each group longest cue first), as the checks ask them: "no
  change" is the direction unchanged and, read as a verdict, a "no".
- Subject: the nearest name before the cue in its comma-separated part of the clause ("creatinine is
  rising, potassium stable"), else a name right after the cue ("rising creatinine"), else the nearest name
  before it in its clause, else the first name after it in its clause ("Increasing: the potassium went from
  3.9 to 5"); else none. Names of what is no result (age, MRN: data/claims.json `other_subjects`) take no
  cue. A cue inside a name is part of the name.
Linear in the answer: one search per cue list, bisections over the name hits and the commas.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import cache

from contracts.languages import LANGUAGES
from services.consumers.scoring.lexicon import claims as _data
from services.consumers.scoring.lexicon import lexicon
from services.consumers.scoring.text import Hit, find, has_cjk, normalize
from services.consumers.scoring.v3.claim_model import DIRECTIONS, VERDICTS, ConclusionClaim
from services.consumers.scoring.v3.names import Named

_WORD = re.compile(r"[a-z0-9']+")
# a clause and the mark that ends it: one match per clause, so a long answer without a "?" is read once (the
# pattern "clause then ?" was retried from every position of such a run, quadratic in its length)
_CLAUSE = re.compile(r"[^.!?。！？\n]*[.!?。！？\n]?")
_COMMA = re.compile(r"[,、]")
_GAP = frozenset({"", "的"})  # what may stand between a cue and the name right after it


def without_question(answer: str, question: str, words: int | None = None,
                     chars_zh: int | None = None) -> str:
    """`answer` (normalised) with the runs that copy `question` and its own questions blanked: the same
    length as the normalised answer, so positions in one are positions in the other."""
    return _blanked(normalize(answer), normalize(question), words or _data()["echo_min_words"],
                    chars_zh or _data()["echo_min_chars_zh"])


def _blanked(norm: str, q: str, n: int, k: int) -> str:
    chars = list(_CLAUSE.sub(lambda m: " " * len(m.group()) if m.group().endswith(("?", "？")) else m.group(),
                             norm))
    q_words = _WORD.findall(q)
    grams = {tuple(q_words[i:i + n]) for i in range(len(q_words) - n + 1)}
    if grams:
        words = list(_WORD.finditer(norm))
        spelled = [w.group() for w in words]
        for i in range(len(words) - n + 1):
            if tuple(spelled[i:i + n]) in grams:
                for j in range(words[i].start(), words[i + n - 1].end()):
                    chars[j] = " "
    zh_grams = {q[i:i + k] for i in range(len(q) - k + 1) if has_cjk(q[i:i + k])}
    if zh_grams:
        for i in range(len(norm) - k + 1):
            if norm[i:i + k] in zh_grams:
                chars[i:i + k] = [" "] * k
    return "".join(chars)


def _hedged(text: str, start: int, zh: bool) -> bool:
    hedges = _data()["hedges"]
    window = _data()["hedge_window"]["zh" if zh else "en"]
    if zh:
        return any(h in text[max(0, start - window):start] for h in hedges["zh"])
    words = _WORD.findall(re.split(r"[.;:!?\n,]", text[max(0, start - 200):start])[-1])[-window:]
    return any(w in hedges["en"] for w in words)


@cache
def _labels(group: tuple[str, ...]) -> dict[str, str]:
    """Cue (lower case) -> its label, for one group of labels."""
    cues = lexicon()["conclusion"]
    return {cue.lower(): label for label in group for lang in LANGUAGES for cue in cues[label][lang]}


@cache
def _takes_cues(key: str) -> bool:
    return key not in _data()["other_subjects"]


def conclusion_claims(norm: str, question: str, clauses: list[tuple[int, int]],
                      named: Named) -> list[ConclusionClaim]:
    """Every conclusion the normalised answer `norm` draws, left to right (see the module's rules)."""
    text = _blanked(norm, normalize(question), _data()["echo_min_words"], _data()["echo_min_chars_zh"])
    commas = [m.start() for m in _COMMA.finditer(norm)]
    ends = [end for _, end in clauses]
    out: list[ConclusionClaim] = []
    for group in (DIRECTIONS, VERDICTS):
        labels = _labels(group)
        for hit in find(text, list(labels)):
            if named.inside(hit.start) or _hedged(text, hit.start, has_cjk(hit.cue)):
                continue
            label = labels[hit.cue]
            if hit.negated:
                if label != "yes":
                    continue
                label = "no"
            clause = clauses[min(bisect_right(ends, hit.start), len(clauses) - 1)]
            subject = _subject(norm, hit, clause, named, commas)
            out.append(ConclusionClaim(subject, label if group is DIRECTIONS else None,
                                       label if group is VERDICTS else None, hit.cue, hit.start, clause))
    return sorted(out, key=lambda c: c.start)


def _subject(norm: str, hit: Hit, clause: tuple[int, int], named: Named, commas: list[int]) -> str | None:
    start, end = clause
    comma = bisect_right(commas, hit.start) - 1
    part = max(start, commas[comma] + 1) if comma >= 0 else start  # the cue's comma-separated part
    after = named.after(hit.end, end)
    first_after = named.first_key(after, _takes_cues) if after is not None else None
    next_to = after is not None and after.start - hit.end <= 2 and norm[hit.end:after.start].strip() in _GAP
    return (_nearest(named, hit.start, part) or (first_after if next_to else None)
            or _nearest(named, part, start) or first_after)


def _nearest(named: Named, at: int, start: int) -> str | None:
    """The subject of the nearest name that takes a cue, ending by `at` and starting at or after `start`."""
    return next((key for h in reversed(named.before(at, start)) if (key := named.first_key(h, _takes_cues))),
                None)
