"""Does an answer state a string or presence fact? A phrase written out (spacing and punctuation aside) or
its numbers cited with the entity named; a subject named, negated or not. Every scorer version judges these
facts alike, so they live here rather than in one version's checks."""

from __future__ import annotations

import re

from contracts.languages import LANGUAGES
from contracts.scenario import Fact
from services.consumers.scoring.lexicon import expand_terms, lexicon, synonym_index
from services.consumers.scoring.numbers import cited_numbers
from services.consumers.scoring.text import find, normalize


def _squash(text: str) -> str:
    return re.sub(r"[\W_]+", "", normalize(text))


def _entities(fact: Fact) -> list[str]:
    """Names of a synonym group that the fact's label contains (the thing the phrase is about)."""
    labels = [normalize(x) for x in ([fact.label.en, fact.label.zh] if fact.label else [])]
    return [name for name in synonym_index() if len(name) > 2 and any(
        find(label, [name]) for label in labels)]


def phrase_stated(text: str, fact: Fact, value: str) -> tuple[bool, str]:
    """A string fact ("2.5 mg twice daily", "positive"): its value or label written out (spacing and
    punctuation aside), or every number of it cited (in any format, counts in words too) with the entity it is
    about named."""
    answer = _squash(text)
    entities = _entities(fact)
    named = not entities or bool(find(normalize(text), expand_terms(entities)))
    labels = [fact.label.en, fact.label.zh] if fact.label else []
    for phrase in [*labels, *([value] if named else [])]:  # the value alone must be about the same thing
        if _squash(phrase) and _squash(phrase) in answer:
            return True, f"states {phrase!r}"
    wanted = cited_numbers(value)
    said = [c.value for c in cited_numbers(text)]
    if wanted and all(any(abs(w.value - v) < 1e-9 for v in said) for w in wanted) and named:
        about = f" for {entities[0]}" if entities else ""
        return True, f"cites {', '.join(w.text for w in wanted)}{about}"
    return False, f"{value!r} not stated"


def presence(text: str, fact: Fact) -> tuple[bool, str]:
    """exists/absent: the label is named, negated for an absent fact and not negated for a present one."""
    want_present = fact.kind == "exists" if not isinstance(fact.value, bool) else bool(fact.value)
    if fact.kind == "absent":
        want_present = False
    names = expand_terms([fact.label.en, fact.label.zh] if fact.label else [])
    hits = find(normalize(text), names)
    if not hits:
        return False, "the fact's subject is not named"
    lex = lexicon()["presence"]["absent"]
    norm = normalize(text)
    absent_cues = find(norm, [c for lang in LANGUAGES for c in lex[lang]])
    said_absent = any(h.negated for h in hits) or any(
        cue.end <= hit.start and hit.start - cue.end <= 12 for cue in absent_cues for hit in hits
    )
    passed = said_absent != want_present
    said, wanted = ("absent" if said_absent else "present"), ("present" if want_present else "absent")
    return passed, f"named as {said}; expected {wanted}"
