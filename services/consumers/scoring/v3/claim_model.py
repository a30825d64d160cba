"""What an answer claims (v3), as data: the numbers it states and the conclusions it draws, each about a
subject (a key of v3/subjects.py `subject_names`, or None when its clause names none). The parsing is
claims.py (numbers, and `parse_answer` for both) and cues.py (conclusions); the checks read these."""

from __future__ import annotations

from dataclasses import dataclass, field

from services.consumers.scoring.numbers import Cited

DIRECTIONS = ("up", "down", "unchanged")
VERDICTS = ("yes", "no")


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
class ConclusionClaim:
    """A conclusion the answer draws: (subject, direction or verdict). Exactly one of the two is set; a
    negated yes is a verdict "no", hedged and echoed cues and other negated ones are no claim at all."""

    subject: str | None  # a key of the subject names, or None (the clause names no subject)
    direction: str | None  # up | down | unchanged (DIRECTIONS)
    verdict: str | None  # yes | no (VERDICTS; a decision's outcome is one of them through its alias)
    cue: str  # the cue as found in the answer (normalised)
    start: int  # where the cue starts in the normalised answer
    clause: tuple[int, int]

    @property
    def label(self) -> str:
        return self.direction or self.verdict or ""


@dataclass(frozen=True)
class ParsedAnswer:
    """One answer as claims, left to right: `claims` (numbers) and `conclusions` (directions, verdicts)."""

    claims: list[Claim]
    conclusions: list[ConclusionClaim] = field(default_factory=list)
