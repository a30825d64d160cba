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
from tests.wiring import migrated

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
    summary = asyncio.run(run_scenarios(jobs(scenarios), AsksOverHttp(), options, migrated(settings)))
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


ASPECTS = {
    "en": {"dose": "What dose of apixaban do you take?", "schedule": "How often do you take apixaban?",
           "ibu_dose": "How much ibuprofen do you take?", "off": "What dose of warfarin do you take?",
           "both": "Do you take apixaban? Any other medicines?"},
    "zh": {"dose": "阿哌沙班你一次吃多少剂量？", "schedule": "阿哌沙班你一天几次？",
           "ibu_dose": "布洛芬你吃多少？", "off": "华法林你一次吃多少剂量？",
           "both": "您吃阿哌沙班吗？还吃别的药吗？"},
}


def with_answers(scenarios, **persona) -> Scenario:
    """The fixture's scenario with the apixaban fact answering its dose and schedule from the record (the
    ibuprofen fact answers none: its order holds no dose)."""
    scenario: Scenario = scenarios[0][0]
    words = {
        "dose": {
            "text": {"en": "I take 2.5 mg of apixaban.", "zh": "阿哌沙班我一次吃2.5mg。"},
            "lay": {"en": "My blood thinner? I think it's 2.5 mg.", "zh": "我的抗凝药好像一次是2.5mg。"},
        },
        "schedule": {
            "text": {"en": "I take apixaban by mouth, twice a day.", "zh": "阿哌沙班我是口服，每天两次。"}
        },
    }
    memory = [
        f.model_validate({**f.model_dump(), "answers": words}) if f.id == "m-apix" else f
        for f in scenario.patient_memory
    ]
    return scenario.model_copy(
        update={"patient_memory": memory, "persona": scenario.persona.model_copy(update=persona)}
    )


@pytest.mark.parametrize("language", ["en", "zh"])
def test_an_aspect_question_gets_the_records_answer_at_the_personas_literacy(scenarios, language):
    high = PatientAgent(with_answers(scenarios, health_literacy="high", anxiety="low"), language)
    reply = high.answer(ASPECTS[language]["dose"])
    assert reply.disclosed == ("m-apix",) and reply.matched
    assert reply.text == high.scenario.memory("m-apix").answers["dose"].text.model_dump()[language]
    assert "missed" not in reply.text and "漏" not in reply.text  # the dose, not the whole fact
    low = PatientAgent(with_answers(scenarios, health_literacy="low", anxiety="low"), language)
    assert low.answer(ASPECTS[language]["dose"]).text == getattr(
        low.scenario.memory("m-apix").answers["dose"].lay, language)
    schedule = low.answer(ASPECTS[language]["schedule"])  # no lay form: the medium wording
    assert schedule.text == getattr(low.scenario.memory("m-apix").answers["schedule"].text, language)


@pytest.mark.parametrize("language", ["en", "zh"])
def test_what_the_record_does_not_hold_is_declined(scenarios, language):
    patient = PatientAgent(with_answers(scenarios, anxiety="low"), language)
    for question in (ASPECTS[language]["ibu_dose"], ASPECTS[language]["off"]):
        reply = patient.answer(question)  # a dose the order lacks; a drug the record does not hold
        assert not reply.matched and reply.disclosed == () and reply.text in style()["dont_know"][language]


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_named_drug_gets_its_fact_and_not_the_whole_list(scenarios, language):
    patient = PatientAgent(with_answers(scenarios, completeness="complete", anxiety="low"), language)
    assert patient.answer(ASPECTS[language]["both"]).disclosed == ("m-apix",)


@pytest.mark.parametrize(("language", "question", "aspect"), [
    ("en", "Before we start, do you take apixaban?", None),  # an ordinary word is no aspect question
    ("zh", "阿哌沙班多久吃一次？", "schedule"),  # how often, not since when
    ("en", "How long have you had that blood thinner?", "since"),
])
def test_the_aspect_asked_is_the_one_the_question_means(scenarios, language, question, aspect):
    from services.simulator.agents.patient import asks_aspect

    assert asks_aspect(question) == aspect
    patient = PatientAgent(with_answers(scenarios, health_literacy="high", anxiety="low"), language)
    reply = patient.answer(question)
    if aspect is None:
        assert reply.text == getattr(patient.scenario.memory("m-apix").text, language)
    elif aspect == "schedule":
        assert reply.text == getattr(patient.scenario.memory("m-apix").answers["schedule"].text, language)
    else:  # the record holds no start for a drug: declined
        assert not reply.matched
