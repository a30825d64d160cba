"""Sessions end to end on the embedded default (SQLite + SQL log, FHIR app in-process): python: assistants
sync and async, the built-ins, what the log holds and in which order, sandboxes, trials and resuming."""

from __future__ import annotations

import asyncio

from fastapi.testclient import TestClient

from events.payloads import Communication
from services.simulator.orchestrator.entry import RunOptions, run_scenarios
from tests.simulator.conftest import assert_session_order, jobs, session_events
from tests.wiring import app_on, migrated

SAMPLES = "python:tests.simulator.sample_assistants"


def run(settings, scenarios, spec, run_id="run-1", **kwargs):
    options = RunOptions(run_id, **{k: v for k, v in kwargs.items() if k != "languages" and k != "trials"})
    plan = jobs(scenarios, trials=kwargs.get("trials", 1), languages=kwargs.get("languages", ("en",)))
    return asyncio.run(run_scenarios(plan, spec, options, migrated(settings)))


def messages(events, type_: str) -> list[Communication]:
    return [Communication.model_validate(e.data) for e in events if e.type == type_]


def test_a_sync_python_assistant_works_the_chart_and_the_log_holds_the_session_in_order(
    settings, scenarios
):
    summary = run(settings, scenarios, f"{SAMPLES}:sync_lookup")
    (outcome,) = summary.outcomes
    assert (outcome.reason, outcome.turns, outcome.error) == ("completed", 4, None)
    events = session_events(settings, outcome.session_id)
    assert_session_order(events, turns=4)
    started = events[0].data
    assert started["runId"] == "run-1" and started["scenario"] == "sim-apixaban-1"
    assert started["scenarioDigest"] == outcome.job.digest
    assert started["scenarioDefinition"]["id"] == "sim-apixaban-1"
    assert (started["trial"], started["language"], started["variant"]) == (0, "en", "implicit")
    answers = [m.text for m in messages(events, "rounds.message.assistant") if m.kind == "answer"]
    # The sandbox's clock hides the creatinine of 2150-01-03; the assistant's own answers stay in its history.
    assert answers[0] == "creatinine values [1.6, 1.1]; history has 0 items"
    assert answers[2] == "creatinine values [1.6, 1.1]; history has 4 items"
    # EHR calls recorded by the FHIR server sit inside their turns; the patient reply carries the facts told.
    kinds = [e.type for e in events[2:5]]
    assert kinds == ["rounds.ehr.request", "rounds.ehr.response", "rounds.message.assistant"]
    (patient,) = messages(events, "rounds.message.patient")
    assert patient.turn == 1 and patient.disclosed_facts == ["m-ibu"] and "ibuprofen" in patient.text
    assert "m-ibu" not in answers[1] and "ibuprofen" in answers[1]
    assert events[-1].data["reason"] == "completed" and events[-1].data["turns"] == 4


def test_the_sandbox_keeps_the_sessions_write_and_the_shared_record_does_not_see_it(settings, scenarios):
    summary = run(settings, scenarios, f"{SAMPLES}:sync_lookup")
    session_id = summary.outcomes[0].session_id
    with TestClient(app_on(settings)) as client:
        ended = client.get(f"/sessions/{session_id}/fhir/MedicationRequest/sim-apix-1")
        writes = client.get(f"/sessions/{session_id}/writes").json()
        shared = client.get("/fhir/MedicationRequest/sim-apix-1").json()
    # the run ended the session: its base answers no more, its writes stay for the scorer
    assert ended.status_code == 410 and ended.json()["resourceType"] == "OperationOutcome"
    (in_session,) = [e["resource"] for e in writes["entry"] if e["resource"]["id"] == "sim-apix-1"]
    assert in_session["dosageInstruction"][0]["text"] == "5 mg twice daily"
    assert shared["dosageInstruction"][0]["text"] == "2.5 mg twice daily"


def test_an_async_python_assistant_and_both_languages(settings, scenarios):
    summary = run(settings, scenarios, f"{SAMPLES}:async_lookup", languages=("en", "zh"))
    assert sorted(o.job.language for o in summary.outcomes) == ["en", "zh"]
    assert {o.reason for o in summary.outcomes} == {"completed"}
    zh = next(o for o in summary.outcomes if o.job.language == "zh")
    events = session_events(settings, zh.session_id)
    doctor = messages(events, "rounds.message.doctor")
    assert doctor[0].text == "肌酐多少？" and doctor[0].language == "zh"


def test_baseline_and_oracle_complete_and_the_oracle_performs_the_expected_write(settings, scenarios):
    for spec in ("baseline", "oracle", "weak"):
        summary = run(settings, scenarios, spec, run_id=f"run-{spec}")
        assert summary.by_reason == {"completed": 1}, (spec, summary.outcomes[0].error)
    weak = summary.outcomes[0]  # answers without looking anything up
    assert not [e for e in session_events(settings, weak.session_id) if e.type.startswith("rounds.ehr.")]


def test_the_oracle_says_the_reference_answers_and_writes_in_its_sandbox(settings, scenarios):
    summary = run(settings, scenarios, "oracle", run_id="run-oracle")
    (outcome,) = summary.outcomes
    events = session_events(settings, outcome.session_id)
    answers = [m.text for m in messages(events, "rounds.message.assistant") if m.kind == "answer"]
    scenario = scenarios[0][0]
    assert answers == [t.answer.en for t in scenario.turns]
    puts = [e for e in events if e.type == "rounds.ehr.request" and e.data["method"] == "PUT"]
    assert [p.data["url"] for p in puts] == ["MedicationRequest/sim-apix-1"]


def test_trials_run_in_separate_sandboxes_and_a_rerun_of_the_run_id_skips_ended_sessions(
    settings, scenarios
):
    first = run(settings, scenarios, "baseline", run_id="run-resume", trials=3)
    assert len({o.session_id for o in first.outcomes}) == 3
    assert sorted(o.job.trial for o in first.outcomes) == [0, 1, 2]
    again = run(settings, scenarios, "baseline", run_id="run-resume", trials=4)
    assert again.skipped == 3 and [o.job.trial for o in again.outcomes] == [3]
    other = run(settings, scenarios, "baseline", run_id="run-other", trials=1)
    assert other.skipped == 0 and len(other.outcomes) == 1


class AsksThePhysician:
    """Asks the physician to clarify every turn (three times on the first), then answers with the reply."""

    spec = "asks-the-physician"

    async def respond(self, request, tools) -> str:
        replies = [await tools.ask_physician("Which value do you mean?")
                   for _ in range(3 if request.turn == 0 else 1)]
        return replies[-1]

    async def aclose(self) -> None:
        return None


def test_clarifying_questions_get_the_explicit_phrasing_bounded_and_counted(settings, scenarios):
    (outcome,) = asyncio.run(run_scenarios(jobs(scenarios), AsksThePhysician(), RunOptions("run-clarify"),
                                           migrated(settings))).outcomes
    assert outcome.reason == "completed" and outcome.clarifications == 6
    events = session_events(settings, outcome.session_id)
    assert_session_order(events, turns=4)
    replies = [m.text for m in messages(events, "rounds.message.doctor") if m.kind == "clarification"]
    explicit = scenarios[0][0].turns[0].text.en.explicit
    assert replies[:2] == [explicit, explicit]
    assert replies[2:] == ["Please answer with what you can find in the chart."] * 4  # bounded: 2 a session
    questions = [m for m in messages(events, "rounds.message.assistant") if m.kind == "clarification"]
    assert len(questions) == 6 and all(q.recipient[0].identifier.value == "doctor" for q in questions)


def test_the_explicit_variant_speaks_the_explicit_phrasing(settings, scenarios):
    plan = jobs(scenarios, variant="explicit")
    (outcome,) = asyncio.run(run_scenarios(plan, "weak", RunOptions("run-explicit"),
                                           migrated(settings))).outcomes
    events = session_events(settings, outcome.session_id)
    said = [m.text for m in messages(events, "rounds.message.doctor")]
    assert said == [t.text.en.explicit for t in scenarios[0][0].turns]
    assert events[0].data["variant"] == "explicit"
