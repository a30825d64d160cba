"""The patient answers the question asked from its memory — nothing unasked, "don't know" for the unknown,
critical facts withheld under `critical_withheld` until the drug is named — in EN and ZH, deterministically;
and over HTTP for assistants in another process, recorded like an in-process question."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from contracts.scenario import Scenario
from services.simulator.agents.patient import PatientAgent, style
from services.simulator.assistant_protocol import SessionTools, TurnRequest
from services.simulator.orchestrator.entry import RunOptions, run_scenarios
from tests.simulator.conftest import jobs, session_events

QUESTIONS = {
    "en": {"unknown": "Have you ever had your gallbladder removed?", "general": "What medicines do you take?",
           "named": "Do you take apixaban, the blood thinner?", "otc": "Any painkillers like ibuprofen?"},
    "zh": {"unknown": "您做过胆囊切除手术吗？", "general": "您平时吃什么药？", "named": "您吃阿哌沙班吗？",
           "otc": "您吃布洛芬这类止痛药吗？"},
}


def agent(scenarios, language: str, **persona) -> PatientAgent:
    scenario: Scenario = scenarios[0][0]
    if persona:
        scenario = scenario.model_copy(update={"persona": scenario.persona.model_copy(update=persona)})
    return PatientAgent(scenario, language)


@pytest.mark.parametrize("language", ["en", "zh"])
def test_asked_about_something_not_in_memory_the_patient_does_not_know(scenarios, language):
    reply = agent(scenarios, language).answer(QUESTIONS[language]["unknown"])
    assert reply.disclosed == () and not reply.matched
    assert reply.text in style()["dont_know"][language]


@pytest.mark.parametrize("language", ["en", "zh"])
def test_critical_withheld_keeps_the_critical_fact_until_the_drug_is_named(scenarios, language):
    patient = agent(scenarios, language)  # the fixture's persona: critical_withheld, low literacy, anxious
    general = patient.answer(QUESTIONS[language]["general"])
    assert "m-apix" not in general.disclosed
    assert not any(word in general.text for word in ("2.5", "阿哌沙班", "blood thinner", "抗凝药"))
    named = patient.answer(QUESTIONS[language]["named"])
    assert named.disclosed == ("m-apix",)
    lay = patient.scenario.memory("m-apix").lay
    assert getattr(lay, language) in named.text  # low literacy: the lay wording
    assert named.text.startswith(style()["anxiety_prefix"]["high"][language])
    # Once told, a general question may repeat it.
    assert "m-apix" in patient.answer(QUESTIONS[language]["general"]).disclosed


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_complete_persona_tells_the_critical_fact_to_a_general_question(scenarios, language):
    patient = agent(scenarios, language, completeness="complete", health_literacy="high", anxiety="low")
    reply = patient.answer(QUESTIONS[language]["general"])
    assert reply.disclosed == ("m-apix",)
    assert reply.text == patient.scenario.memory("m-apix").text.model_dump()[language]


@pytest.mark.parametrize("language", ["en", "zh"])
def test_only_what_is_asked_is_told_and_answers_are_deterministic(scenarios, language):
    first = agent(scenarios, language).answer(QUESTIONS[language]["otc"])
    again = agent(scenarios, language).answer(QUESTIONS[language]["otc"])
    assert first == again and first.disclosed == ("m-ibu",)


def test_odd_questions_never_break_the_patient(scenarios):
    patient = agent(scenarios, "en")
    for text in ["", "?", "K", "a" * 10000, "DROP TABLE patients; --", "💊💊"]:
        assert patient.answer(text).text


class AsksOverHttp:
    """An assistant that uses the patient endpoint the way a remote one would (POST {"text"})."""

    spec = "asks-over-http"

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        async with httpx.AsyncClient(base_url=request.patient_url.rsplit("/sessions/", 1)[0]) as client:
            path = "/sessions/" + request.patient_url.rsplit("/sessions/", 1)[1]
            bad = await client.post(path, json={"question": "?"})
            unknown = await client.post("/sessions/nope/patient", json={"text": "hi"})
            said = await client.post(path, json={"text": "Do you take ibuprofen?"})
        return f"{bad.status_code} {unknown.status_code} {said.status_code} {said.json()['text']}"

    async def aclose(self) -> None:
        return None


def test_the_patient_endpoint_over_http_is_recorded_like_an_in_process_question(settings, scenarios):
    options = RunOptions("run-http-patient", network=True)
    summary = asyncio.run(run_scenarios(jobs(scenarios), AsksOverHttp(), options, settings))
    (outcome,) = summary.outcomes
    assert outcome.reason == "completed", outcome.error
    events = session_events(settings, outcome.session_id)
    answers = [e.data["payload"][0]["contentString"] for e in events
               if e.type == "rounds.message.assistant" and e.data["extension"][-1]["valueCode"] == "answer"]
    assert answers[0].startswith("400 404 200 I'm really worried, doctor. I take ibuprofen")
    patient = [e for e in events if e.type == "rounds.message.patient"]
    assert len(patient) == 4
    assert all(e.data["extension"][1] == {"url": "https://rounds.dev/fhir/StructureDefinition/disclosed-fact",
                                          "valueString": "m-ibu"} for e in patient)
