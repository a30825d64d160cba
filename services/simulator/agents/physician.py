"""The simulated physician: says each turn's words from the scenario and answers clarifying questions.

Deterministic (no model): the scenario already holds both phrasings of every turn, so the physician speaks the
implicit one by default (`--variant explicit` for the other). When the assistant asks the physician to clarify
instead of answering, the physician reveals the turn's hidden intent — its explicit phrasing — at most
`max_clarifications` times per session (then it repeats that it wants an answer); every clarification is
counted, since a scorer may charge for them.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.simulator.data_model import Scenario

INSIST = {
    "en": "Please answer with what you can find in the chart.",
    "zh": "请根据病历里能查到的信息直接回答。",
}


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
