"""Runs against a model endpoint that fails, hangs or is misconfigured: the pre-flight stops them before any
session, their options are recorded and held to on a rerun, failed and interrupted sessions are rerun, Ctrl-C
ends the open sessions `interrupted` after writing what finished, and the exit code says whose fault it was
(the strict OpenAI-compatible server of fake_openai.py; the fixture record's one 4-turn scenario)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from contracts.end_reasons import NOT_ASSISTANT_FAULT
from events.catalog import CATALOG
from services.consumers.report.model_usage import load_model_usage
from services.simulator.assistant_protocol import EndpointUnavailable
from services.simulator.orchestrator.entry import RunOptions, run_scenarios
from services.simulator.orchestrator.jobs import RecordedSession, RunOptionsChanged, jobs_to_run
from tests.simulator.adapters.conftest import Served
from tests.simulator.adapters.fake_openai import HANG, FakeOpenAI, error, text, tool_call
from tests.simulator.conftest import SCENARIOS, jobs, session_events
from tests.wiring import bus_on, migrated, root_on

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def model() -> Iterator[tuple[FakeOpenAI, str]]:
    fake = FakeOpenAI()
    served = Served(fake.app)
    yield fake, f"{served.root}/v1"
    served.stop()


def run(settings, scenarios, spec: str, options: RunOptions):
    return asyncio.run(run_scenarios(jobs(scenarios), spec, options, migrated(settings)))


def run_events(settings, run_id: str, kind: str) -> list:
    from events.bus import UnknownTopic

    try:
        logged = session_events(settings, None)
    except UnknownTopic:  # nothing was ever recorded in this database
        return []
    return [e for e in logged if e.type == kind and CATALOG.payload(e).run_id == run_id]


def test_the_preflight_stops_a_run_before_any_session(settings, scenarios, model) -> None:
    fake, base = model
    fake.reset(text(fake, "never asked"))
    with pytest.raises(EndpointUnavailable, match=rf"{base} \(model 'nope'\)"):
        run(settings, scenarios, f"openai:nope@{base}", RunOptions("run-preflight"))
    with pytest.raises(EndpointUnavailable, match=r"cannot reach the model endpoint http://127.0.0.1:9/v1"):
        run(settings, scenarios, "openai:fake-model@http://127.0.0.1:9/v1", RunOptions("run-preflight"))
    assert run_events(settings, "run-preflight", "rounds.session.started") == []
    assert fake.model_lists == 1


def test_options_are_recorded_and_a_rerun_with_others_is_refused(settings, scenarios, model) -> None:
    fake, base = model
    fake.reset(text(fake, "Nothing to add."))
    spec = f"openai:fake-model@{base}"
    summary = run(settings, scenarios, spec, RunOptions("run-opts", max_tokens=64))
    assert summary.by_reason == {"completed": 1} and summary.endpoint == f"{base} serves fake-model"
    (started,) = run_events(settings, "run-opts", "rounds.session.started")
    assert started.data["runOptions"] == {"assistant": spec, "maxSteps": 8, "turnTimeoutS": 600, "seed": 0,
                                          "maxTokens": 64, "modelTimeoutS": 300}  # the local profile
    assert {r["max_tokens"] for r in fake.requests} == {64}
    with pytest.raises(RunOptionsChanged, match=r"maxTokens: 64 → 32.*--accept-changed-options"):
        run(settings, scenarios, spec, RunOptions("run-opts", max_tokens=32))
    with pytest.raises(RunOptionsChanged, match="assistant: 'openai:fake-model@.*' → 'weak'"):
        run(settings, scenarios, "weak", RunOptions("run-opts", max_tokens=64))
    again = run(settings, scenarios, spec, RunOptions("run-opts", max_tokens=32, accept_changed_options=True))
    assert (again.skipped, again.outcomes) == (1, [])
    check_the_report_shows_model_usage(settings, "run-opts")


def check_the_report_shows_model_usage(settings, run_id: str) -> None:
    """4 model calls of 50 prompt and 10 completion tokens (the fake's usage), priced 1 and 2 USD/M."""
    from typer.testing import CliRunner

    from rounds.cli import app
    from services.consumers.report.model_usage import load_model_usage
    from services.consumers.scoring.api import score_run

    usage = load_model_usage(bus_on(settings), run_id, 1.0, 2.0)
    assert (usage.calls, usage.turns, usage.sessions) == (4, 4, 1)
    assert usage.prompt_tokens_per_session.total == 200 and usage.completion_tokens_per_turn.p50 == 10
    assert usage.cost_usd == pytest.approx((200 * 1 + 40 * 2) / 1e6)
    score_run(root_on(settings), run_id)
    args = ["report", "--run", run_id, "--prompt-price", "1", "--completion-price", "2", "--database-url",
            settings.database_url]
    shown = CliRunner().invoke(app, args, env={"COLUMNS": "160"})
    assert shown.exit_code == 0, shown.output
    assert "model calls: 4 in 4 turns of 1 sessions" in shown.output and "latency per call" in shown.output
    assert "$0.0003" in shown.output


def test_a_hanging_model_times_out_and_retry_failed_reruns_it(settings, scenarios, model) -> None:
    fake, base = model
    fake.reset(HANG)
    spec = f"openai:fake-model@{base}"
    first = run(settings, scenarios, spec, RunOptions("run-retry", model_timeout_s=0.3))
    (timed_out,) = first.outcomes
    assert timed_out.reason == "timeout" and "model timeout of 0.3 s" in timed_out.error
    logged = session_events(settings, None)
    (cut,) = [e for e in logged if e.type == "rounds.model.call" and e.subject == timed_out.session_id]
    assert (cut.data["outcome"], cut.data["turn"]) == ("timeout", 0)  # the spent call is on the log
    usage = load_model_usage(bus_on(settings), "run-retry")
    assert (usage.calls, usage.cut) == (1, {"timeout": 1}) and usage.latency_ms_per_call.p50 >= 300
    fake.reset(text(fake, "Here now."))
    plain = run(settings, scenarios, spec, RunOptions("run-retry", model_timeout_s=0.3))
    assert (plain.skipped, plain.outcomes) == (1, [])  # a timeout is a result unless asked
    retried = run(settings, scenarios, spec, RunOptions("run-retry", model_timeout_s=0.3, retry_failed=True))
    (outcome,) = retried.outcomes
    assert outcome.reason == "completed" and outcome.model_calls == 4
    started = {s.subject: CATALOG.payload(s).retry_of for s in run_events(settings, "run-retry",
                                                                     "rounds.session.started")}
    assert started == {timed_out.session_id: None, outcome.session_id: timed_out.session_id}
    check_the_report_counts_the_rerun_only(settings, "run-retry", timed_out.session_id, outcome.session_id)


def test_retry_failed_reruns_every_end_the_exit_code_sends_it() -> None:
    """Exit code 1 names `--retry-failed` for every end not charged to the assistant: each is rerun by it."""
    ends = [*sorted(NOT_ASSISTANT_FAULT), "timeout", "completed", "assistant_error", "max_steps"]
    recorded = {f"s{i}": RecordedSession(f"s{i}", (reason,), f"e{i}", {}, ended=reason, time=f"t{i}")
                for i, reason in enumerate(ends)}
    jobs = [SimpleNamespace(key=(reason,)) for reason in ends]
    resumed, _ = jobs_to_run(recorded, jobs, retry_failed=False)
    assert [j.key for j in resumed] == [("interrupted",)]
    retried, retry_of = jobs_to_run(recorded, jobs, retry_failed=True)
    assert {j.key[0] for j in retried} == NOT_ASSISTANT_FAULT | {"timeout"}
    assert retry_of == {j.key: f"s{ends.index(j.key[0])}" for j in retried}  # each names what it reruns


def check_the_report_counts_the_rerun_only(settings, run_id: str, old: str, new: str) -> None:
    """The superseded timeout is listed as superseded by its rerun, and counted nowhere: not in the metrics,
    the reasons, pass^k, the terminal's counts or the HTML page's scores."""
    from typer.testing import CliRunner

    from rounds.cli import app
    from services.consumers.report.html_page import render_html
    from services.consumers.scoring.api import score_run

    report = score_run(root_on(settings), run_id)
    listed = {s.session: s for s in report.sessions}
    assert set(listed) == {old, new}
    assert listed[old].superseded_by == new and listed[old].reason == "timeout"
    assert listed[new].superseded_by is None and listed[new].retry_of == old
    assert (report.metrics.sessions, report.metrics.excluded_sessions, report.superseded) == (1, 0, 1)
    assert report.reasons == {"completed": 1} and report.metrics.pass_hat_k.keys() == {"1"}
    assert all(m.sessions == 1 for m in report.by["language"].values())
    shown = CliRunner().invoke(app, ["report", "--run", run_id, "--database-url", settings.database_url],
                               env={"COLUMNS": "160"})
    assert shown.exit_code == 0, shown.output
    assert "2 sessions: 1 scored, 0 unscored, 1 superseded by their reruns" in shown.output
    page = render_html(report)
    assert f'data-superseded-by="{new}"' in page and f"superseded by its rerun {new}" in page


def test_cancelling_a_run_ends_open_sessions_interrupted_and_a_rerun_resumes(settings, scenarios, model):
    """The model's first call reads the patient; its second hangs. Cancelling the run (what Ctrl-C does)
    closes the hanging request, writes the finished read's tool result, ends the session `interrupted`."""
    fake, base = model
    fake.reset(tool_call(fake, "fhir_read", {"resourceType": "Patient", "id": "sim-p1"}), HANG)
    spec = f"openai:fake-model@{base}"

    async def cancelled():  # two sessions, one at a time: the second waits for the first when the run stops
        two = RunOptions("run-cut", concurrency=1)
        task = asyncio.create_task(run_scenarios(jobs(scenarios, trials=2), spec, two, migrated(settings)))
        deadline = time.monotonic() + 30
        while len(fake.requests) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        task.cancel()
        return await task

    summary = asyncio.run(cancelled())
    (outcome,) = summary.outcomes
    assert summary.interrupted and outcome.reason == "interrupted" and outcome.model_calls == 2
    events = session_events(settings, outcome.session_id)
    types = [e.type for e in events]
    (cut,) = [e.data for e in events if e.type == "rounds.model.call"]
    assert cut["outcome"] == "cancelled" and cut["usage"]["latency_ms"] >= 0
    assert types[-1] == "rounds.session.ended" and events[-1].data["reason"] == "interrupted"
    assert "rounds.tool.result" in types and "rounds.ehr.response" in types
    deadline = time.monotonic() + 5
    while fake.disconnects == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert fake.disconnects == 1
    fake.reset(text(fake, "Back again."))
    resumed = asyncio.run(run_scenarios(jobs(scenarios, trials=2), spec, RunOptions("run-cut"),
                                        migrated(settings)))
    assert [o.reason for o in resumed.outcomes] == ["completed", "completed"]
    started = {s.subject: CATALOG.payload(s).retry_of for s in run_events(settings, "run-cut",
                                                                     "rounds.session.started")}
    again = {o.job.trial: o.session_id for o in resumed.outcomes}
    assert started == {outcome.session_id: None, again[outcome.job.trial]: outcome.session_id,
                       again[1 - outcome.job.trial]: None}


# -- `rounds run` as a user runs it ------------------------------------------------------------------------


def rounds_run(settings, *args: str) -> subprocess.Popen:
    env = {**os.environ, "ROUNDS_DATABASE_URL": settings.database_url, "ROUNDS_BUS": "sql"}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.Popen([sys.executable, "-m", "rounds.cli", "run", "--scenarios", str(SCENARIOS),
                             "--no-score", *args], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.slow
def test_the_cli_refuses_bad_specs_and_unreachable_endpoints_with_one_message(settings) -> None:
    cases = [("openai:m@127.0.0.1:8767/v1", 2, "did you mean http://127.0.0.1:8767/v1"),
             ("openai:@", 2, "the model name is empty"),
             ("openai:m@http://127.0.0.1:9/v1", 3, "cannot reach the model endpoint http://127.0.0.1:9/v1 "
                                                   "(model 'm')")]
    for spec, status, said in cases:
        out, err = (p := rounds_run(settings, "--assistant", spec)).communicate(timeout=120)
        assert p.returncode == status and said in err, (spec, p.returncode, out, err)
        assert len(err.strip().splitlines()) == 1, err


@pytest.mark.slow
def test_the_cli_exit_codes_progress_and_ctrl_c(settings, model) -> None:
    fake, base = model
    spec = f"openai:fake-model@{base}"
    fake.reset(error(401, "bad key", code="invalid_api_key"))
    p = rounds_run(settings, "--assistant", spec, "--run-id", "cli-infra")
    out, err = p.communicate(timeout=120)
    assert p.returncode == 1 and "infrastructure_error" in out, out + err
    assert "--run-id cli-infra --retry-failed" in err

    fake.reset(text(fake, "All fine."))
    out, err = (p := rounds_run(settings, "--assistant", spec)).communicate(timeout=120)
    assert p.returncode == 0, out + err
    assert "turn 1/4 done" in out and "turn 4/4 done" in out and "1 model calls" in out

    fake.reset(HANG)
    p = rounds_run(settings, "--assistant", spec, "--run-id", "cli-cut")
    deadline = time.monotonic() + 60
    while not fake.requests and time.monotonic() < deadline:
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130 and "interrupted" in out, out + err
    assert "resume it with" in err and "--run-id cli-cut" in err
    (ended,) = run_events(settings, "cli-cut", "rounds.session.ended")
    assert ended.data["reason"] == "interrupted"


def test_an_answer_too_large_for_an_event_is_stored_and_scored(settings, scenarios, model) -> None:
    from events.blobs import BlobStore
    from events.payloads import Communication
    from foundation.db import make_engine
    from services.consumers.scoring.api import score_run

    fake, base = model
    huge = "Creatinine 1.6 mg/dL. " + "blah " * 120_000  # ~600 kB
    fake.reset(text(fake, huge))
    options = RunOptions("run-huge", max_tokens=200_000)
    summary = run(settings, scenarios, f"openai:fake-model@{base}", options)
    (outcome,) = summary.outcomes
    assert (outcome.reason, outcome.turns) == ("completed", 4), outcome.error
    events = session_events(settings, outcome.session_id)
    answers = [Communication.model_validate(e.data) for e in events if e.type == "rounds.message.assistant"]
    ref = answers[0].stored_text
    assert ref is not None and answers[0].text.startswith("Creatinine 1.6 mg/dL.")
    assert len(answers[0].text.encode()) < 70_000
    engine = make_engine(settings.database_url)
    try:
        assert BlobStore(engine).get(ref).decode() == huge.strip()
    finally:
        engine.dispose()
    call = next(e for e in events if e.type == "rounds.tool.call")
    assert call.data["arguments"]["storedSize"] > 600_000
    report = score_run(root_on(settings), "run-huge")
    (scored,) = report.sessions
    assert scored.reason == "completed" and scored.score is not None


def test_a_fact_past_the_first_64_kib_of_an_answer_is_scored(settings, scenarios, model) -> None:
    """An answer too large for an event (256 KiB) carries its first 64 KiB; the creatinine the first turn asks
    for comes after them, in the stored whole text, which the scorer judges (the view keeps the head)."""
    from events.payloads import Communication
    from services.consumers.scoring.api import score_run

    fake, base = model
    fake.reset(text(fake, "Looking. " * 35_000 + "Creatinine 1.6 mg/dL."))  # ~315 kB, the fact at the end
    options = RunOptions("run-tail", max_tokens=200_000)
    summary = run(settings, scenarios, f"openai:fake-model@{base}", options)
    (outcome,) = summary.outcomes
    assert outcome.reason == "completed", outcome.error
    answer = next(Communication.model_validate(e.data) for e in session_events(settings, outcome.session_id)
                  if e.type == "rounds.message.assistant")
    assert answer.stored_text is not None and "Creatinine" not in answer.text
    (scored,) = score_run(root_on(settings), "run-tail").sessions
    (cited,) = [c for c in scored.turns[0].checks if c.kind == "fact_cited"]
    assert cited.passed, cited.evidence
    assert "Creatinine" not in (scored.turns[0].exchanges[-1].text or "")  # the view shows the head
    # Inspect's re-score reads the same whole text (one path from events to score, one_session.score_logged)
    from rounds.inspect.scoring import score_logged_session

    again = score_logged_session(settings, outcome.session_id)
    (cited_again,) = [c for c in again.turns[0].checks if c.kind == "fact_cited"]
    assert cited_again.passed, cited_again.evidence
    assert again.score == scored.score
