"""What an answer claims (v3), as data: the numbers it states, each about a subject (a key of v3/subjects.py
`subject_names`, or None when its clause names none). The parsing is claims.py; the checks read these."""

from __future__ import annotations

from dataclasses import dataclass

from services.consumers.scoring.numbers import Cited


@dataclass(frozen=True)
class Claim:
    """A number the answer states: (subject, value, unit, time)."""

    subject: str | None  # a key of the subject names, or None (a number about nothing named)
    value: float
    unit: str | None  # canonical unit, when a known one is written after the number
    unit_unknown: bool  # a unit-like token after the number that no spelling of data/units.json is
    cited: Cited
    clause: tuple[int, int]
    future: bool
    threshold: bool  # a bound or a count ("below 3.5", "24 hours", "13 results")
    in_question: bool  # the clause ends with a question mark: a question is not a claim of the answer

    @property
    def unitless(self) -> bool:
        return self.unit is None and not self.unit_unknown


@dataclass(frozen=True)
class ParsedAnswer:
    """One answer as claims, left to right."""

    claims: list[Claim]
