"""`http:` — an assistant in another process (a webhook) works the session over real HTTP: its EHR calls are
recorded by the FHIR server, its patient questions through the patient endpoint, all inside their turns."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from contracts.scenario import Scenario
from services.simulator.orchestrator.entry import RunOptions, run_scenarios
from services.simulator.orchestrator.environment import free_port
from tests.simulator.conftest import assert_session_order, jobs, session_events
from tests.wiring import migrated

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def webhook() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(HERE / "webhook_assistant.py"), str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.TransportError:
                if proc.poll() is not None:
                    raise RuntimeError(proc.stderr.read()) from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/answer"
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_a_webhook_assistant_in_another_process_runs_the_session_end_to_end(settings, scenarios, webhook):
    summary = asyncio.run(run_scenarios(jobs(scenarios, languages=("en", "zh")), f"http:{webhook[5:]}",
                                        RunOptions("run-webhook"), migrated(settings)))
    assert summary.by_reason == {"completed": 2}, [o.error for o in summary.outcomes]
    for outcome in summary.outcomes:
        events = session_events(settings, outcome.session_id)
        assert_session_order(events, turns=4)
        assert events[0].data["fhirBase"].startswith("http://127.0.0.1:")  # a real URL for another process
        kinds = [e.type for e in events]
        assert kinds.count("rounds.ehr.request") == 4 and kinds.count("rounds.message.patient") == 1
        answers = [e.data["payload"][0]["contentString"] for e in events
                   if e.type == "rounds.message.assistant" and "answer" in str(e.data["extension"])]
        assert answers[0] == f"Creatinine 1.6 mg/dL (turn 0, 0 earlier messages, {outcome.job.language})"
        assert answers[2].startswith("Creatinine 1.6 mg/dL (turn 2, 4 earlier messages")
        assert "ibuprofen" in answers[1] or "布洛芬" in answers[1]


def test_a_webhook_answer_without_text_is_the_assistants_fault_and_an_unreachable_one_is_not(
    settings, scenarios, webhook
):
    def saying(message: str):
        words = {"implicit": message, "explicit": message}
        line = {**scenarios[0][1]}
        line["turns"] = [dict(line["turns"][0], text={"en": words, "zh": words})]
        return jobs([(Scenario.model_validate(line), line)])

    (bad,) = asyncio.run(run_scenarios(saying("garbage"), f"http:{webhook[5:]}",
                                       RunOptions("run-bad-hook"), migrated(settings))).outcomes
    assert bad.reason == "assistant_error" and "no text" in bad.error
    (looped,) = asyncio.run(run_scenarios(saying("loop"), f"http:{webhook[5:]}",
                                          RunOptions("run-loop-hook"), migrated(settings))).outcomes
    assert looped.reason == "max_steps" and "past the limit of 8" in looped.error
    closed = f"http://127.0.0.1:{free_port()}/answer"  # a webhook that went away after the pre-flight
    (down,) = asyncio.run(run_scenarios(jobs(scenarios), f"http:{closed[5:]}",
                                        RunOptions("run-down-hook",
                                                   preflight=False), migrated(settings))).outcomes
    assert down.reason == "infrastructure_error" and "unreachable" in down.error


def test_the_preflight_stops_a_run_on_a_webhook_nobody_serves_before_any_session(settings, scenarios,
                                                                                 webhook):
    from services.simulator.assistant_protocol import EndpointUnavailable

    closed = f"http://127.0.0.1:{free_port()}/answer"
    with pytest.raises(EndpointUnavailable, match=rf"cannot reach the assistant webhook {closed}"):
        asyncio.run(run_scenarios(jobs(scenarios), f"http:{closed[5:]}", RunOptions("run-no-hook"),
                                  migrated(settings)))
    from events.bus import UnknownTopic

    try:
        logged = session_events(settings, None)
    except UnknownTopic:  # nothing was ever recorded in this database
        logged = []
    assert not [e for e in logged if (e.data or {}).get("runId") == "run-no-hook"]
    summary = asyncio.run(run_scenarios(jobs(scenarios), f"http:{webhook[5:]}", RunOptions("run-hook-up"),
                                        migrated(settings)))
    assert summary.endpoint.startswith(f"{webhook} answers (HTTP ") and summary.by_reason == {"completed": 1}
    for bad in ("http:", "http:not a url", "https://"):
        with pytest.raises(ValueError, match="expected http:<an http"):
            asyncio.run(run_scenarios(jobs(scenarios), bad, RunOptions("run-bad-spec"), migrated(settings)))


@pytest.mark.parametrize("separate", [False, True], ids=["embedded", "separate-server"])
def test_a_webhook_assistant_completes_with_auth_on(settings, scenarios, webhook, separate):
    """Auth on: the webhook gets the session's token (`accessToken`) and sends it on its FHIR and patientUrl
    calls, which both demand it — on the in-process FHIR app, and on the simulator's own patient endpoint next
    to a separate server."""
    from tests.simulator.adapters.conftest import Served
    from tests.wiring import app_on

    secured = settings.model_copy(update={"auth": True})
    served = Served(app_on(secured)) if separate else None
    try:
        base = f"{served.root}/fhir" if served else None
        options = RunOptions(f"run-webhook-auth-{separate}", fhir_base=base)
        summary = asyncio.run(run_scenarios(jobs(scenarios), f"http:{webhook[5:]}", options,
                                            migrated(secured)))
    finally:
        if served is not None:
            served.stop()
    (outcome,) = summary.outcomes
    assert (outcome.reason, outcome.turns, outcome.error) == ("completed", 4, None)
    events = session_events(secured, outcome.session_id)
    assert [e.type for e in events].count("rounds.message.patient") == 1
    answers = [e.data["payload"][0]["contentString"] for e in events
               if e.type == "rounds.message.assistant" and "answer" in str(e.data["extension"])]
    assert answers[0].startswith("Creatinine 1.6 mg/dL (turn 0") and "ibuprofen" in answers[1]
