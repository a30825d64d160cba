"""The simulated patient: answers the question asked from the scenario's patient memory, nothing unasked.

Why this shape (PhysAssistBench's weakness was patient answers replayed by tool name whatever was asked):
the patient matches the *question's words* against each memory fact's topics (EN and ZH, lay and clinical
names). A question naming a fact's own topic (a drug, a diagnosis) gets that fact and nothing else; a
general question about a category ("any other medicines?") gets the category's facts — except `critical`
ones under the `critical_withheld` persona, which stay hidden until one of their topics is named. A question
asking one aspect (the dose, how and when a drug is taken, since when, allergies: style `aspects`) gets only
that aspect's answer, from the record (`MemoryFact.answers`; for allergies the allergy facts themselves),
and a decline when the record does not hold it. A
question naming a drug or diagnosis the memory does not hold, or nothing matching → the patient says it
doesn't know. Literacy picks the lay wording, anxiety adds the persona's framing. Deterministic by default
(same question, same words); an optional LLM voice (agents/voice.py) may rephrase, checked by a verifier,
falling back to these words.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from contracts.languages import LANGUAGES
from contracts.scenario import MemoryFact, Scenario
from contracts.vocabulary import vocabulary

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


@cache
def generic_topics() -> frozenset[str]:
    """Topic words that name no one fact: the general-question words and style `generic_topics`."""
    s = style()
    words = {w for lang in LANGUAGES for w in s["generic_topics"][lang]}
    categories = [c for c in s["general_questions"].values() if isinstance(c, dict)]
    words |= {w for c in categories for ws in c.values() for w in ws}
    return frozenset(w.lower() for w in words)


def names_topic(question: str, fact: MemoryFact, specific: bool = False) -> bool:
    """The question names one of the fact's topics (in either language: assistants may mix them); with
    `specific`, one of its own (a drug or diagnosis, not a word like 'medicine' every drug fact carries)."""
    q = question.lower()
    return any(
        mentions(q, term)
        for lang in LANGUAGES
        for term in fact.topics.get(lang, ())
        if not (specific and term.lower() in generic_topics())
    )


@cache
def clinical_names() -> frozenset[str]:
    """Every drug, diagnosis, symptom and allergy word the vocabulary knows (EN and ZH, lay and clinical), and
    the voice's clinical terms: a question naming one the memory does not hold asks about something off
    the record."""
    v, terms = vocabulary(), style()["voice"]["clinical_terms"]
    names = {t for lang in LANGUAGES for t in terms[lang]}
    for table in ("drugs", "conditions"):
        for key, entry in v[table].items():
            if key.startswith("_"):
                continue
            names.update(entry.get(k) for k in ("en", "zh", "lay_en", "lay_zh"))
            names.update(entry.get("topics_en", ()) + entry.get("topics_zh", ()))
    return frozenset(n.lower() for n in names if n) - generic_topics()


def asks_aspect(question: str) -> str | None:
    """The aspect (style `aspects`: dose, since, schedule) the question asks, if any."""
    q = question.lower()
    for aspect, words in style()["aspects"].items():
        if not aspect.startswith("_") and any(mentions(q, t) for lang in LANGUAGES for t in words[lang]):
            return aspect
    return None


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

    def unheld_masked(self, question: str) -> str:
        """The question (lower case) with every drug or diagnosis the memory does not hold blanked out, so a
        held topic inside it is not heard (UTI's 尿 in 糖尿病, diabetes); unchanged when it names none."""
        q = question.lower()
        held = {t.lower() for f in self.scenario.patient_memory for ts in f.topics.values() for t in ts}
        heard = [t for t in held if mentions(q, t)]
        for name in sorted(clinical_names() - held, key=len, reverse=True):
            pattern = _pattern(name)
            if pattern is not None and not any(name in t for t in heard):  # not part of a held name said
                q = pattern.sub(" ", q)
        return q

    def select(self, question: str) -> list[MemoryFact]:
        """The facts this question earns, in memory order: those it names by their own topics — and then
        nothing else —, else, unless it names something off the record, those of the categories it asks."""
        persona = self.scenario.persona
        memory = self.scenario.patient_memory
        heard = self.unheld_masked(question)
        named = [f for f in memory if names_topic(heard, f, specific=True)]
        if named or heard != question.lower():
            return named
        general = [
            f
            for f in memory
            if (asks_category(question, f.category) or names_topic(question, f))
            and not (f.critical and persona.completeness == "critical_withheld" and f.id not in self.told)
        ]
        if persona.completeness == "partial" and general:
            untold = [f for f in general if f.id not in self.told]
            general = untold[:1] or general[:1]  # one thing at a time: the doctor must keep asking
        return general

    def _lay(self, node) -> bool:
        return self.scenario.persona.health_literacy == "low" and node.lay is not None

    def wording(self, fact: MemoryFact) -> str:
        return getattr(fact.lay if self._lay(fact) else fact.text, self.language)

    def aspect_wording(self, fact: MemoryFact, aspect: str) -> str | None:
        """The fact's answer to one aspect at the persona's literacy; None: the record does not hold it."""
        found = fact.answers.get(aspect)
        if found is None:
            return None
        return getattr(found.lay if self._lay(found) else found.text, self.language)

    def answer(self, question: str) -> PatientReply:
        """The deterministic reply to `question` (never raises on any text)."""
        self.questions += 1
        s, lang = style(), self.language
        anxiety = self.scenario.persona.anxiety
        facts = self.select(question or "")
        aspect = asks_aspect(question or "")
        said: dict[str, str] = {}  # fact id -> its words (the same answer once: a symptom and its diagnosis)
        for fact in facts:
            if aspect is None:
                said[fact.id] = self.wording(fact)
            elif fact.category in s["aspects"][aspect]["categories"]:
                own = s["aspects"][aspect].get("own_text", False)
                words = self.wording(fact) if own else self.aspect_wording(fact, aspect)
                if words is not None and words not in said.values():
                    said[fact.id] = words
        if not said:
            options = s["dont_know"][lang]
            return PatientReply(options[self.questions % len(options)], (), False)
        self.told.update(said)
        body = s["joiner"][lang].join(said.values())
        text = s["anxiety_prefix"][anxiety][lang] + body + s["anxiety_suffix"][anxiety][lang]
        return PatientReply(text, tuple(said), True)
