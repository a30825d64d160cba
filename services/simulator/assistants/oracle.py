"""`oracle` — the scorer's upper bound: answers from the scenario's truth and performs the expected writes.

It is the only assistant that sees the scenario (the orchestrator hands it over through `observe_scenario`).
It reads the record like any assistant: the resources each turn's facts come from, by `_id` per type.
Per turn it asks the patient about each fact the turn expects from them (naming the fact's topic), writes
each expected resource's example through the session's FHIR base (PUT when the example has an id, else POST;
so the writes really land in the sandbox and are recorded), and says the turn's reference answer.
"""

from __future__ import annotations

from contracts.scenario import Scenario
from contracts.vocabulary import phrase
from services.simulator.assistant_protocol import AssistantFailure, SessionTools, TurnRequest

ID_CHUNK = 500  # ids per `_id` search (~20 KB of URL, the limit is 32 KiB): a FHIR-AgentBench question
# needs up to ~1,000 in 3 requests, within the step limit


def fallback_answer(scenario: Scenario, turn: int, language: str) -> str:
    """The facts of the turn in words, for turns without a reference answer."""
    parts = []
    for fact in scenario.turns[turn].facts:
        label = getattr(fact.label, language) if fact.label else (fact.code or fact.kind)
        value = "" if fact.value is None else f" {fact.value}"
        unit = f" {fact.unit}" if fact.unit else ""
        when = f" ({fact.time.isoformat()})" if fact.time else ""
        parts.append(f"{label}:{value}{unit}{when}")
    return "; ".join(parts) or phrase("oracle_done")[language]


async def read_sources(tools: SessionTools, turn) -> None:
    """Read what the turn's facts come from through the session's base, like any assistant must (scorer v3
    counts a fact only if its resources reached the assistant): `_id` searches per resource type, 500 ids
    each."""
    for kind, ids in sorted(turn.sources_by_type().items()):
        for start in range(0, len(ids), ID_CHUNK):
            chunk = ids[start:start + ID_CHUNK]
            response = await tools.http.get(kind, params={"_id": ",".join(chunk), "_count": str(len(chunk))})
            if response.status_code >= 500:
                response.raise_for_status()


class OracleAssistant:
    spec = "oracle"

    def __init__(self) -> None:
        self.truth: dict[str, Scenario] = {}

    def observe_scenario(self, session_id: str, scenario: Scenario) -> None:
        self.truth[session_id] = scenario

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        scenario = self.truth[request.session_id]
        turn = scenario.turns[request.turn]
        language = request.language
        for fact_id in turn.patient_facts:
            topics = scenario.memory(fact_id).topics.get(language) or [""]
            question = phrase("oracle_ask_patient")[language]
            await tools.ask_patient(question.format(topics[0]))
        await read_sources(tools, turn)
        for write in turn.writes:
            resource = write.resource
            if resource.get("id"):
                response = await tools.http.put(f"{write.resource_type}/{resource['id']}", json=resource)
            else:
                response = await tools.http.post(write.resource_type, json=resource)
            if response.status_code >= 500:
                response.raise_for_status()
            if response.status_code >= 400:
                raise AssistantFailure(
                    f"the expected {write.resource_type} was refused: "
                    f"HTTP {response.status_code} {response.text[:300]}"
                )
        if request.turn == len(scenario.turns) - 1:
            self.truth.pop(request.session_id, None)
        if turn.answer is not None:
            return getattr(turn.answer, language)
        return fallback_answer(scenario, request.turn, language)

    async def aclose(self) -> None:
        self.truth.clear()


def create(arg: str = "") -> OracleAssistant:
    return OracleAssistant()
