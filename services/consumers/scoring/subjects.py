"""What a number in an answer is cited as: the observation named nearest before it in its clause
("creatinine is 1.8, up from 1.1"; "肌酐为1.8，之前1.1"), else, for a number written with a unit, the one
named first after it there ("2.6 mg/dL for creatinine"; a bare number before a name, as in "the 24-hour mean
glucose", qualifies the name, it is not its value). A number in a clause that names no observation — a
dose ("apixaban 2.5 mg", "2 TAB"), a count, a number of the reference answer about something else — is cited
as nothing.

Clauses end at sentence punctuation and semicolons (EN and ZH), never at a decimal point. An observation's
names are its facts' labels, the analyte words of data/units.json and their synonyms (data/synonyms.json),
except names that are unit spellings ("mg" is magnesium's symbol and a dose's unit).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from contracts.scenario import Scenario
from services.consumers.scoring.lexicon import expand_terms, units
from services.consumers.scoring.numbers import Cited
from services.consumers.scoring.text import find
from services.consumers.scoring.units import analyte_of, canonical_unit

_CLAUSE_END = re.compile(r"[;!?\n。；！？]|\.(?!\d)")


def observation_names(scenario: Scenario, code: str) -> list[str]:
    """How an answer may name the observation `code` ("system|code"): the labels of the scenario's facts
    with that code, its analyte's words, and every synonym of those (unit spellings left out)."""
    labels = [text for turn in scenario.turns for fact in turn.facts if fact.code == code and fact.label
              for text in (fact.label.en, fact.label.zh)]
    analyte = analyte_of(code, labels[0] if labels else None)
    words = list(units()["analytes"][analyte]["words"]) if analyte else []
    return [name for name in expand_terms(labels + words) if canonical_unit(name) is None]


def _clause(text: str, at: int) -> tuple[int, int]:
    start = max((m.end() for m in _CLAUSE_END.finditer(text, 0, at)), default=0)
    end = _CLAUSE_END.search(text, at)
    return start, end.start() if end else len(text)


def cited_as(norm: str, cited: Cited, names: Mapping[str, list[str]]) -> set[str]:
    """The keys of `names` (observation -> its names) that `cited` (a number of `norm`, the normalised
    answer) is cited as: the observation(s) named nearest before it in its clause, else (with a unit) first
    after it."""
    start, end = _clause(norm, cited.start)
    clause = norm[start:end]
    at = cited.start - start
    before: dict[str, int] = {}
    after: dict[str, int] = {}
    for key, terms in names.items():
        for hit in find(clause, terms):
            if hit.end <= at:
                before[key] = max(before.get(key, -1), hit.end)
            elif hit.start >= at + len(cited.text):
                after[key] = min(after.get(key, len(clause)), hit.start)
    if before:
        nearest = max(before.values())
        return {key for key, position in before.items() if position == nearest}
    if after and cited.unit is not None:
        first = min(after.values())
        return {key for key, position in after.items() if position == first}
    return set()
