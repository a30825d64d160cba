"""An optional LLM voice for the patient, through any OpenAI-compatible endpoint, that can never leak.

The deterministic patient (patient.py) decides *what* is told — the facts the question earned; the voice only
rephrases those facts in the persona's words. A verifier then rejects any reply that says a number, a
medicine or a diagnosis the disclosed facts do not say (every topic of the patient's memory and a list of
common clinical words count), or is empty; a rejected or failed reply falls back to the deterministic
wording, so the voice can change how the patient sounds but never what the patient discloses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from contracts.scenario import Scenario
from services.simulator.agents.patient import LANGUAGES, PatientReply, mentions, style

NUMBER = re.compile(r"\d+(?:[.,]\d+)?")


def _numbers(text: str) -> set[str]:
    return {n.replace(",", ".") for n in NUMBER.findall(text)}


def verify(candidate: Any, reply: PatientReply, scenario: Scenario, language: str) -> str | None:
    """Why `candidate` may not be said (None: it may)."""
    if not isinstance(candidate, str) or not candidate.strip():
        return "empty"
    parts = [reply.text]
    for fact in (scenario.memory(fact_id) for fact_id in reply.disclosed):
        parts += fact.text.model_dump().values()
        parts += fact.lay.model_dump().values() if fact.lay else ()
        parts += (word for words in fact.topics.values() for word in words)
    allowed = " ".join(parts)
    extra = _numbers(candidate) - _numbers(allowed)
    if extra:
        return f"numbers not in the disclosed facts: {sorted(extra)}"
    terms = {w for f in scenario.patient_memory for ws in f.topics.values() for w in ws}
    terms |= {w for lang in LANGUAGES for w in style()["voice"]["clinical_terms"][lang]}
    said = candidate.lower()
    leaked = sorted(t for t in terms if mentions(said, t) and not mentions(allowed.lower(), t))
    if leaked:
        return f"clinical words not in the disclosed facts: {leaked}"
    return None


@dataclass
class PatientVoice:
    """`openai:<model>[@<base_url>]` as the patient's voice (`rounds run --patient-voice`)."""

    model: str
    client: Any  # openai.AsyncOpenAI
    rejected: list[str] = field(default_factory=list)  # why replies fell back (counted in tests and reports)

    async def speak(self, question: str, reply: PatientReply, live: Any) -> str:
        scenario, language = live.scenario, live.language
        persona = scenario.persona
        facts = " ".join(live.patient.wording(scenario.memory(f)) for f in reply.disclosed)
        system = style()["voice"]["system"][language].format(
            facts=facts, literacy=persona.health_literacy, anxiety=persona.anxiety)
        try:
            completion = await self.client.chat.completions.create(
                model=self.model, temperature=0,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": question}])
            candidate = completion.choices[0].message.content
        except Exception as exc:  # noqa: BLE001 - a voice that fails is no reason to end the session
            self.rejected.append(f"endpoint: {exc!r}"[:300])
            return reply.text
        problem = verify(candidate, reply, scenario, language)
        if problem is not None:
            self.rejected.append(problem)
            return reply.text
        return candidate.strip()


def create_voice(spec: str, http_client: Any = None) -> PatientVoice:
    """`openai:<model>[@<base_url>]` (key from OPENAI_API_KEY; a placeholder for a local endpoint)."""
    import os

    from openai import AsyncOpenAI

    from services.simulator.assistants.endpoint import parse_spec

    kind, _, rest = spec.partition(":")
    if kind != "openai":
        raise ValueError(f"patient voice: expected openai:<model>[@<base_url>], got {spec!r}")
    endpoint = parse_spec(rest, "patient voice")
    client = AsyncOpenAI(api_key=os.environ.get("OPENAI_API_KEY") or "not-needed",
                         base_url=endpoint.base_url, http_client=http_client, max_retries=1, timeout=60)
    return PatientVoice(endpoint.model, client)
