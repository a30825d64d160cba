"""The simulated physician: says each turn's words from the scenario and answers clarifying questions.

Deterministic (no model): the scenario already holds both phrasings of every turn, so the physician speaks the
implicit one by default (`--variant explicit` for the other). When the assistant asks the physician to clarify
instead of answering, the physician reveals the turn's hidden intent — its explicit phrasing — at most
`max_clarifications` times per session (then it repeats that it wants an answer); every clarification is
counted, since a scorer may charge for them.
"""

from __future__ import annotations

from dataclasses import dataclass

from contracts.scenario import Scenario
from contracts.vocabulary import phrase

INSIST: dict[str, str] = phrase("physician_insist")  # said once the clarifications are used up


@dataclass
class Physician:
    scenario: Scenario
    language: str
    variant: str = "implicit"
    max_clarifications: int = 2
    clarifications: int = 0

    def say(self, turn: int) -> str:
        """The physician's message opening `turn`."""
        return self.scenario.turns[turn].text.get(self.language, self.variant)

    def clarify(self, turn: int, question: str) -> str:
        """The answer to a clarifying question during `turn` (the explicit phrasing, bounded)."""
        self.clarifications += 1
        if self.clarifications > self.max_clarifications:
            return INSIST[self.language]
        return self.scenario.turns[turn].text.get(self.language, "explicit")
