"""A scripted model for Inspect's `mockllm` provider: per physician turn it calls Rounds' tools the way a
capable assistant would (asks the patient about each fact the turn expects from them, performs the turn's
expected writes, searches the record) and then answers. The scenario file is the script: the model finds the
turn by the physician's words. `quality` picks the answer: "reference" says the turn's reference answer,
"vague" says something that cites nothing (low scores), so the runs have varied scores to agree on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, ModelOutput, ModelUsage

from contracts.scenario import Scenario


def plan(scenario: Scenario, turn: int, language: str) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls of one turn, answer last."""
    spec = scenario.turns[turn]
    calls: list[tuple[str, dict[str, Any]]] = []
    for fact_id in spec.patient_facts:
        topic = (scenario.memory(fact_id).topics.get(language) or ["health"])[0]
        calls.append(("ask_patient", {"question": f"Can you tell me about your {topic}?"}))
    for write in spec.writes:
        resource = dict(write.resource)
        calls.append(("fhir_update" if resource.get("id") else "fhir_create", {"resource": resource}))
    calls.append(("fhir_search", {"resourceType": "Observation",
                                  "params": {"patient": scenario.patient.split("/", 1)[1], "_sort": "-date",
                                             "_count": 3}}))
    # the resources the turn's facts come from, as the oracle reads them (scorer v3 grounds every fact)
    for kind, ids in sorted(spec.sources_by_type().items()):
        calls.append(("fhir_search", {"resourceType": kind, "params": {"_id": ",".join(ids),
                                                                         "_count": len(ids)}}))
    return calls


# usage each output reports (else mockllm counts tokens with tiktoken, which downloads its tables)
TOKENS = 100


def call(name: str, arguments: dict[str, Any]) -> ModelOutput:
    output = ModelOutput.for_tool_call("mockllm/model", name, arguments)
    output.usage = ModelUsage(input_tokens=TOKENS - 10, output_tokens=10, total_tokens=TOKENS)
    return output


def scripted(scenarios: list[Scenario], quality: Callable[[Scenario, int], str] = lambda s, t: "reference"):
    """The mockllm `custom_outputs` callable."""

    def turn_of(text: str) -> tuple[Scenario, int, str]:
        for scenario in scenarios:
            for turn in scenario.turns:
                for language in ("en", "zh"):
                    phrasing = getattr(turn.text, language)
                    if text in (phrasing.implicit, phrasing.explicit):
                        return scenario, turn.index, language
        raise AssertionError(f"no scenario turn says {text!r}")

    def output(messages, tools, tool_choice, config) -> ModelOutput:
        assert {t.name for t in tools} >= {"fhir_search", "fhir_read", "fhir_create", "fhir_update",
                                          "ask_patient", "answer"}
        last_user = max(i for i, m in enumerate(messages) if isinstance(m, ChatMessageUser))
        scenario, turn, language = turn_of(messages[last_user].text)
        done = sum(1 for m in messages[last_user:] if isinstance(m, ChatMessageAssistant))
        calls = plan(scenario, turn, language)
        if done < len(calls):
            name, arguments = calls[done]
            return call(name, arguments)
        answer = scenario.turns[turn].answer
        said = getattr(answer, language) if answer and quality(scenario, turn) == "reference" else "Noted."
        return call("answer", {"text": said})

    return output
