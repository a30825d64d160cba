"""Conclusions (v3): does the answer conclude the expected direction or verdict about the subject asked?

A conclusion check (a `conclusion` rubric item, or a `trend`/`decision` fact to be cited) judges the
answer's conclusion claims (cues.py: the question's words out, hedges and negated cues dropped, each claim
attributed to a subject) against what the turn asks (`Asked`):
- A direction is about the turn's trend fact's subject (a lab): only directions about that lab count. A
  direction about another lab ("creatinine is rising; potassium is stable" asked about creatinine) or a drug
  ("increase the furosemide") is about something else: it neither passes nor contradicts. A `conclusion`
  item picks the turn's trend facts whose value it expects (all of them if none does).
- A verdict is about a decision, whose subjects are the results its turn names (the subjects of the turn's
  other facts, the names in the physician's message and in the decision's own strings: the drug it covers)
  and whatever drug it acts on (the order placed, the antibiotic that covers): verdicts about those count, a
  verdict about another result (magnesium's, asked about potassium) does not. A turn that names no result
  ("If it's out of date, reorder it.") counts verdicts about any.
- A claim whose clause names no subject counts when the turn asks this one conclusion: one trend subject for
  a direction, one decision for a verdict ("It is rising." answering "Which way is it heading?"). When the
  turn asks several, such a claim says nothing: the answer must name which.
- A conclusion with no trend or decision fact on its turn counts every claim (the whole answer).
The check passes only if a counted claim carries the expected label and no counted claim contradicts it
(lexicon `contradicts`: "rising … stable" about one lab fails). A decision needs its verdict (yes/no, through
`decision_aliases` / `verdict_aliases`), never the rule's label.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from contracts.scenario import Fact, Turn
from services.consumers.scoring.lexicon import claims as _data
from services.consumers.scoring.lexicon import lexicon
from services.consumers.scoring.text import normalize
from services.consumers.scoring.v3.claim_model import DIRECTIONS, VERDICTS, ConclusionClaim
from services.consumers.scoring.v3.cues import conclusion_claims
from services.consumers.scoring.v3.names import Named, clauses, subjects_named
from services.consumers.scoring.v3.subjects import subject_of

_NO_NAMES: dict[str, list[str]] = {}


def verdict_alias(value: str) -> str | None:
    low = value.lower()
    return lexicon()["decision_aliases"].get(low) or _data()["verdict_aliases"].get(low)


@dataclass(frozen=True)
class Asked:
    """What a conclusion check asks: the expected label and which claims speak to it."""

    expected: str  # yes | no | up | down | unchanged
    subjects: frozenset[str]  # the results it is about (empty: any)
    drugs: bool  # claims about a drug count (a decision acts on drugs)
    alone: bool  # claims about no subject count (the turn asks this one conclusion)

    def about(self, claim: ConclusionClaim) -> bool:
        if claim.subject is None:
            return self.alone
        if claim.subject.startswith("drug:"):
            return self.drugs
        return not self.subjects or claim.subject in self.subjects


def asked_of_item(params: Mapping[str, object], turn: Turn, question: str,
                  subjects: Mapping[str, list[str]]) -> Asked:
    """What `turn` asks of a conclusion item (its `expected` verdict, aliases folded), in every version."""
    expected = str(params.get("expected", "")).lower()
    return asked(verdict_alias(expected) or expected, turn, question, subjects)


def asked(expected: str, turn: Turn, question: str, subjects: Mapping[str, list[str]],
          fact: Fact | None = None) -> Asked:
    """What `turn` asks of a conclusion `expected` (a conclusion item's, or `fact`'s own value)."""
    if expected in DIRECTIONS:
        trends = [f for f in turn.facts if f.kind == "trend"]
        chosen = [fact] if fact else [f for f in trends if f.value == expected] or trends
        keys = frozenset(subject_of(f) for f in chosen)
        return Asked(expected, keys, drugs=not keys, alone=len({subject_of(f) for f in trends}) <= 1)
    decisions = [f for f in turn.facts if f.kind == "decision"]
    chosen = [fact] if fact else [f for f in decisions if _alias(f) == expected] or decisions
    named = {subject_of(f) for f in turn.facts if f.kind != "decision"}
    named |= subjects_named(" ; ".join([question, *(s for f in chosen for s in _strings(f))]), subjects)
    results = frozenset(k for k in named if not k.startswith("drug:"))
    return Asked(expected, results, drugs=True, alone=len(decisions) <= 1)


def asked_of_fact(fact: Fact, turn: Turn, question: str, subjects: Mapping[str, list[str]]) -> Asked | None:
    """A trend's direction or a decision's verdict as a conclusion check; None for any other fact (and a
    decision without a yes/no alias, whose verdict word is read as a phrase)."""
    if not isinstance(fact.value, str):
        return None
    if fact.kind == "trend":
        return asked(fact.value, turn, question, subjects, fact)
    expected = verdict_alias(fact.value) if fact.kind == "decision" else None
    return asked(expected, turn, question, subjects, fact) if expected else None


def _alias(fact: Fact) -> str | None:
    return verdict_alias(fact.value) if isinstance(fact.value, str) else None


def _strings(fact: Fact) -> list[str]:
    """What a decision's record names besides its value: its label, the drug it covers, the duplicates."""
    label = [fact.label.en, fact.label.zh] if fact.label else []
    return label + [v for v in (fact.model_extra or {}).values() if isinstance(v, str)]


def judge(found: list[ConclusionClaim], ask: Asked) -> tuple[bool, str]:
    """Passes if a claim that speaks to `ask` carries its label and none contradicts it."""
    group = VERDICTS if ask.expected in VERDICTS else DIRECTIONS
    if ask.expected not in group:
        return False, f"unknown conclusion {ask.expected!r}"
    mine = [c for c in found if c.label in group]
    counted = [c for c in mine if ask.about(c)]
    elsewhere = [f"{c.label} ({_short(c.subject)})" for c in mine if not ask.about(c)]
    seen = list(dict.fromkeys(c.label for c in counted))
    where = f" about {', '.join(sorted(_short(k) for k in ask.subjects))}" if ask.subjects else ""
    aside = f"; about other subjects: {', '.join(elsewhere)}" if elsewhere else ""
    if ask.expected not in seen:
        return False, f"no {ask.expected} conclusion{where} (found {', '.join(seen) or 'nothing'}{aside})"
    opposite = [label for label in seen if label in lexicon()["contradicts"][ask.expected]]
    if opposite:
        return False, f"conflicting conclusions{where}: {', '.join(seen)} (expected {ask.expected}){aside}"
    return True, f"concludes {ask.expected}{where}{aside}"


def _short(key: str | None) -> str:
    return "none named" if key is None else key.rsplit("|", 1)[-1].split(":", 1)[-1]


def conclusion(answer: str, expected: str, question: str = "") -> tuple[bool, str]:
    """The answer's conclusion read from its text alone (no subject names: every claim is about the one
    thing asked)."""
    norm = normalize(answer)
    found = conclusion_claims(norm, question, clauses(norm), Named(norm, _NO_NAMES))
    return judge(found, Asked(expected, frozenset(), drugs=True, alone=True))
