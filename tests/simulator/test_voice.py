"""The optional LLM patient voice (an OpenAI-compatible endpoint, here a scripted one with the exact wire
format): it may rephrase what the deterministic patient discloses, never add a number, drug or diagnosis."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from services.simulator.agents.patient import PatientAgent
from services.simulator.agents.voice import create_voice, verify
from services.simulator.orchestrator.entry import RunOptions, run_scenarios
from tests.simulator.adapters.fake_openai import FakeOpenAI, error, text
from tests.simulator.conftest import jobs, session_events
from tests.wiring import migrated


@pytest.fixture
def fake() -> FakeOpenAI:
    return FakeOpenAI()


def voice_for(fake: FakeOpenAI):
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=fake.app))
    return create_voice("openai:fake-model@http://fake.local/v1", http_client=client)


class Live:
    def __init__(self, scenario, language):
        self.scenario, self.language = scenario, language
        self.patient = PatientAgent(scenario, language)


@pytest.mark.parametrize(
    ("said", "accepted", "why"),
    [
        ("Oh, I take ibuprofen most days, for my knee.", True, None),
        ("I take ibuprofen most days, and apixaban too.", False, "apixaban"),
        ("I take 800 of ibuprofen for my knee.", False, "800"),
        ("Ibuprofen most days. I also have diabetes.", False, "diabetes"),
        ("", False, "empty"),
    ],
)
def test_the_verifier_lets_through_only_what_was_disclosed(scenarios, fake, said, accepted, why):
    scenario = scenarios[0][0]
    live = Live(scenario, "en")
    reply = live.patient.answer("Do you take ibuprofen?")
    assert reply.disclosed == ("m-ibu",)
    fake.reset(text(fake, said))
    voice = voice_for(fake)
    spoken = asyncio.run(voice.speak("Do you take ibuprofen?", reply, live))
    assert spoken == (said if accepted else reply.text)
    if why:
        assert why in voice.rejected[-1]
    assert (verify(said, reply, scenario, "en") is None) is accepted
    sent = fake.requests[0]
    assert sent["model"] == "fake-model" and sent["messages"][1]["content"] == "Do you take ibuprofen?"
    assert "ibuprofen" in sent["messages"][0]["content"] and "apixaban" not in sent["messages"][0]["content"]


def test_a_failing_endpoint_falls_back_and_zh_numbers_are_checked(scenarios, fake):
    scenario = scenarios[0][0]
    live = Live(scenario, "zh")
    reply = live.patient.answer("您吃阿哌沙班吗？")
    fake.reset(error(500, "down"))
    voice = voice_for(fake)
    assert asyncio.run(voice.speak("您吃阿哌沙班吗？", reply, live)) == reply.text
    assert verify("我每天吃两次阿哌沙班，2.5毫克。", reply, scenario, "zh") is None
    assert "5" in verify("我每天吃5毫克阿哌沙班。", reply, scenario, "zh")


def test_a_session_with_a_voice_records_its_words_and_the_same_disclosed_facts(settings, scenarios, fake):
    fake.reset(text(fake, "Yeah, ibuprofen, most days, for the knee."))
    options = RunOptions("run-voice", voice=voice_for(fake))
    spec = "python:tests.simulator.sample_assistants:sync_lookup"
    summary = asyncio.run(run_scenarios(jobs(scenarios), spec, options, migrated(settings)))
    (outcome,) = summary.outcomes
    assert outcome.reason == "completed", outcome.error
    (patient,) = [e.data for e in session_events(settings, outcome.session_id)
                  if e.type == "rounds.message.patient"]
    assert patient["payload"][0]["contentString"] == "Yeah, ibuprofen, most days, for the knee."
    told = [x["valueString"] for x in patient["extension"] if x["url"].endswith("disclosed-fact")]
    assert told == ["m-ibu"]
