"""`weak` — a deliberately weak assistant: answers at once without looking anything up.

It marks the floor of the scores (facts never cited, writes never made, the patient never asked) and checks
that scorers really discriminate: a scorer that gives `weak` the marks of `baseline` is broken.
"""

from __future__ import annotations

from contracts.vocabulary import phrase
from services.simulator.assistant_protocol import SessionTools, TurnRequest

ANSWER: dict[str, str] = phrase("weak_answer")  # the same words whatever was asked


class WeakAssistant:
    spec = "weak"

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        return ANSWER[request.language]

    async def aclose(self) -> None:
        return None


def create(arg: str = "") -> WeakAssistant:
    return WeakAssistant()
