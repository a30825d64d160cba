"""Is a fact stated — by a claim about its subject? (v3)

A numeric fact passes only on a claim about its subject (subjects.py) with its value in a unit it converts
to: a written unit must be a known one (an unknown unit never passes) and a known unit that does not convert
fails. Claims about the subject that state neither the fact's value nor any result of it known by `now` (nor
another fact of the session) disagree with it: the fact fails. A count passes only on a whole number written
without a unit, next to what it counts. Trends and decisions are conclusions about their subject
(conclusions.py: the answer's conclusion claims judged against what the turn asks; a decision needs its
verdict, never its label); strings and presence are checked as in v2.
"""

from __future__ import annotations

from collections.abc import Iterable

from contracts.scenario import Fact
from services.consumers.scoring.checks.facts import quantity_matches
from services.consumers.scoring.fact_phrases import phrase_stated, presence
from services.consumers.scoring.lexicon import claims as data
from services.consumers.scoring.numbers import Cited
from services.consumers.scoring.text import find, normalize
from services.consumers.scoring.units import analyte_of
from services.consumers.scoring.v3.claim_model import Claim, ParsedAnswer
from services.consumers.scoring.v3.conclusions import Asked, judge
from services.consumers.scoring.v3.cues import without_question
from services.consumers.scoring.v3.subjects import subject_of


def _matches(claim: Claim, value: float, unit: str | None, fact: Fact) -> bool:
    if claim.unit_unknown:
        return False
    analyte = analyte_of(fact.code, fact.label.en if fact.label else None)
    return quantity_matches(claim.cited, value, unit, analyte, fact.tolerance)


def _fmt(claims: Iterable[Claim]) -> str:
    return ", ".join(c.cited.text + (f" {c.unit}" if c.unit else " ?unit" if c.unit_unknown else "")
                     for c in claims) or "none"


def numeric_fact(fact: Fact, claims: list[Claim], known: list[tuple[float, str | None]]) -> tuple[bool, str]:
    """`known`: values of the fact's subject an answer may also state (results by `now`, other facts)."""
    key = subject_of(fact)
    about = [c for c in claims if c.subject == key and not c.threshold and not c.in_question]
    target = float(fact.value)  # type: ignore[arg-type]
    hits = [c for c in about if _matches(c, target, fact.unit, fact)]
    if not hits:
        return False, f"no claim about {key.rsplit('|', 1)[-1]} states {fact.value} {fact.unit or ''} " \
                      f"(claims: {_fmt(about)})"
    matched = {id(c) for c in hits}
    disagree = [c for c in about if id(c) not in matched
                and not any(_matches(c, value, unit or fact.unit, fact) for value, unit in known)]
    if disagree:
        return False, f"claims about {key.rsplit('|', 1)[-1]} disagree: {_fmt(disagree)} beside {_fmt(hits)}"
    return True, f"claims {_fmt(hits[:1])} about {key.rsplit('|', 1)[-1]}"


def count_fact(fact: Fact, claims: list[Claim], norm: str, names: list[str]) -> tuple[bool, str]:
    """A whole number without a unit in a clause naming what is counted, written next to it or after a count
    cue ("13 potassium results", "number of results: 13", "共13次")."""
    target = int(fact.value)  # type: ignore[arg-type]
    for c in claims:
        if not c.unitless or c.cited.decimals or c.value != target or c.in_question:
            continue
        start, end = c.clause
        clause_hits = find(norm[start:end], names)
        at = c.cited.start - start
        stop = at + len(c.cited.text)
        tail = norm[c.cited.start + len(c.cited.text):c.cited.start + len(c.cited.text) + 16].lstrip()
        next_to = any(0 <= h.start - stop <= 3 or 0 <= at - h.end <= 4 for h in clause_hits)
        noun = tail.startswith(tuple(data()["count_nouns"]))
        before = norm[start:c.cited.start]
        cue = any(cue in before for cues in data()["count_cues"].values() for cue in cues)
        if next_to or noun or (cue and clause_hits):
            return True, f"counts {c.cited.text} {fact.label.en if fact.label else ''}"
    return False, f"count {target} not stated (numbers with units never count)"


def fact_stated_v3(text: str, fact: Fact, answer: ParsedAnswer, known: list[tuple[float, str | None]],
                   question: str, names: list[str], asked: Asked | None = None) -> tuple[bool, str]:
    """Is `fact` stated? `asked`: what the turn asks of a trend's direction or a decision's verdict
    (conclusions.asked_of_fact)."""
    value = fact.value
    claims = answer.claims
    if asked is not None:
        return judge(answer.conclusions, asked)
    if fact.kind == "trend" and isinstance(value, str):
        return False, f"trend {value!r}: a trend is judged as a conclusion (none asked)"
    if fact.kind == "decision" and isinstance(value, str):
        return _verdict_phrase(text, value)
    if fact.kind == "count" and isinstance(value, int) and not isinstance(value, bool):
        return count_fact(fact, claims, normalize(text), names)
    if isinstance(value, str) and fact.kind != "absent":  # the question's own words are no answer (an MRN)
        return phrase_stated(_unechoed(text, question), fact, value)
    if fact.kind in ("exists", "absent") or isinstance(value, bool):
        return presence(text, fact)
    if isinstance(value, int | float):
        return numeric_fact(fact, claims, known)
    return False, "fact has no checkable value"


def _unechoed(text: str, question: str) -> str:
    echo = data()["echo_fact"]
    return without_question(text, question, echo["words"], echo["chars_zh"])


def _verdict_phrase(text: str, value: str) -> tuple[bool, str]:
    """A decision without a yes/no alias: the verdict word itself ("no_conflict" as "no conflict"), on word
    boundaries and not negated."""
    hits = [h for h in find(normalize(text), [value.replace("_", " ")]) if not h.negated]
    return (bool(hits), f"verdict {value!r} {'stated' if hits else 'not stated'}")


__all__ = ["Cited", "fact_stated_v3"]
