"""The simulated patient: answers the question asked from the scenario's patient memory, nothing unasked.

Why this shape (PhysAssistBench's weakness was patient answers replayed by tool name whatever was asked):
the patient matches the *question's words* against each memory fact's topics (EN and ZH, lay and clinical
names). A question naming a topic gets that fact; a general question about a category ("any other
medicines?") gets the category's facts — except `critical` ones under the `critical_withheld` persona, which
stay hidden until one of their topics is named. Nothing matching → the patient says it doesn't know.
Literacy picks the lay wording, anxiety adds the persona's framing. Deterministic by default (same question,
same words); an optional LLM voice (agents/voice.py) may rephrase, checked by a verifier, falling back to
these words.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from contracts.languages import LANGUAGES
from contracts.scenario import MemoryFact, Scenario

STYLE_FILE = Path(__file__).parent / "data" / "patient_style.json"


@cache
def style() -> dict:
    return json.loads(STYLE_FILE.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class PatientReply:
    text: str
    disclosed: tuple[str, ...]  # memory fact ids told (recorded in the event, never in the text)
    matched: bool  # False: nothing the patient knows was asked about ("I don't know")


@cache
def _pattern(term: str) -> re.Pattern[str] | None:
    """How a term is found in text: whole words for alphabetic terms, substring for CJK (compiled once)."""
    term = term.strip().lower()
    if not term:
        return None
    if re.search(r"[\u3400-\u9fff]", term):
        return re.compile(re.escape(term))
    return re.compile(rf"(?<![a-z0-9]){re.escape(term)}(?![a-z0-9])")


def mentions(question: str, term: str) -> bool:
    """Whether `question` (lower case) names `term`: whole words for alphabetic terms, substring for CJK."""
    pattern = _pattern(term)
    return pattern is not None and pattern.search(question) is not None


def names_topic(question: str, fact: MemoryFact) -> bool:
    """The question names one of the fact's topics (in either language: assistants may mix them)."""
    q = question.lower()
    return any(mentions(q, term) for lang in LANGUAGES for term in fact.topics.get(lang, ()))


def asks_category(question: str, category: str) -> bool:
    words = style()["general_questions"].get(category, {})
    q = question.lower()
    return any(mentions(q, term) for lang in LANGUAGES for term in words.get(lang, ()))


@dataclass
class PatientAgent:
    """One session's patient. `told` accumulates what it has disclosed (a fact once told may be repeated)."""

    scenario: Scenario
    language: str
    told: set[str] = field(default_factory=set)
    questions: int = 0

    def select(self, question: str) -> list[MemoryFact]:
        """The facts this question earns, in memory order."""
        persona = self.scenario.persona
        named = [f for f in self.scenario.patient_memory if names_topic(question, f)]
        general = [
            f
            for f in self.scenario.patient_memory
            if f not in named
            and asks_category(question, f.category)
            and not (f.critical and persona.completeness == "critical_withheld" and f.id not in self.told)
        ]
        if persona.completeness == "partial" and general:
            untold = [f for f in general if f.id not in self.told]
            general = untold[:1] or general[:1]  # one thing at a time: the doctor must keep asking
        return named + general

    def wording(self, fact: MemoryFact) -> str:
        lay = self.scenario.persona.health_literacy == "low" and fact.lay is not None
        return getattr(fact.lay if lay else fact.text, self.language)

    def answer(self, question: str) -> PatientReply:
        """The deterministic reply to `question` (never raises on any text)."""
        self.questions += 1
        s, lang = style(), self.language
        anxiety = self.scenario.persona.anxiety
        facts = self.select(question or "")
        if not facts:
            options = s["dont_know"][lang]
            return PatientReply(options[self.questions % len(options)], (), False)
        self.told.update(f.id for f in facts)
        body = s["joiner"][lang].join(self.wording(f) for f in facts)
        text = s["anxiety_prefix"][anxiety][lang] + body + s["anxiety_suffix"][anxiety][lang]
        return PatientReply(text, tuple(f.id for f in facts), True)
