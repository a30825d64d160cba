"""What a run says about itself agrees with what happened: turns reached, answered and scored mean the same
on the progress bar, in the summary, in the metrics and in the report (contracts/score.py TURN_COUNTS);
every failure reason is listed with its count; a run whose model never reads the EHR is flagged, at the end
and early (the strict OpenAI-compatible server of fake_openai.py; the fixture record's 4-turn scenario)."""

from __future__ import annotations

import asyncio
import io
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace

import pytest
from rich.console import Console

from services.consumers.report.run_state import RunState, next_step, run_state
from services.consumers.report.source import ReportUnavailable, load_report
from services.consumers.scoring.api import score_run
from services.simulator.assistant_protocol import EndpointUnavailable
from services.simulator.orchestrator.entry import RunOptions, run_scenarios
from services.simulator.orchestrator.progress import EARLY_TURNS, RunProgress
from services.simulator.orchestrator.session_loop import TurnProgress
from services.simulator.orchestrator.summary import failure_lines, no_tools_warning, turn_line
from tests.simulator.adapters.conftest import Served
from tests.simulator.adapters.fake_openai import FakeOpenAI, text
from tests.simulator.conftest import jobs
from tests.wiring import migrated, root_on


def served(fake: FakeOpenAI) -> Iterator[tuple[FakeOpenAI, str]]:
    server = Served(fake.app)
    yield fake, f"{server.root}/v1"
    server.stop()


@pytest.fixture
def model() -> Iterator[tuple[FakeOpenAI, str]]:
    yield from served(FakeOpenAI())


@pytest.fixture
def toolless() -> Iterator[tuple[FakeOpenAI, str]]:
    yield from served(FakeOpenAI(drops_tools=True))


def quiet_progress(planned) -> tuple[RunProgress, io.StringIO]:
    out = io.StringIO()
    progress = RunProgress(planned, console=Console(file=out, width=200, force_terminal=False))
    return progress, out


def run(settings, scenarios, spec: str, run_id: str, progress: RunProgress):
    options = RunOptions(run_id, on_turn=progress.turn)
    return asyncio.run(run_scenarios(jobs(scenarios), spec, options, migrated(settings),
                                     progress=progress.session))


def test_a_session_ending_in_turn_0_counts_the_same_everywhere(settings, scenarios, model) -> None:
    fake, base = model
    fake.reset(text(fake, None))  # no text: the assistant's fault, in turn 0
    progress, _ = quiet_progress(jobs(scenarios))
    summary = run(settings, scenarios, f"openai:fake-model@{base}", "run-turn0", progress)
    (outcome,) = summary.outcomes
    counts = (outcome.reason, outcome.turns, outcome.reached, outcome.scenario_turns)
    assert counts == ("assistant_error", 0, 1, 4)
    assert turn_line(summary) == "turns: 0 answered, 1 reached, of 4 (a turn not reached scores 0)"
    bar = progress.bar.tasks[progress.turns]
    assert (bar.completed, bar.total) == (0, 4)  # never "4/4" for a session that answered nothing
    assert "3 not reached" in bar.fields["now"]
    metrics = score_run(root_on(settings), "run-turn0").metrics
    assert (metrics.turns, metrics.turns_reached, metrics.turns_answered) == (4, 1, 0)


def test_a_model_that_never_calls_a_tool_is_flagged(settings, scenarios, toolless) -> None:
    _, base = toolless
    progress, out = quiet_progress(jobs(scenarios))
    summary = run(settings, scenarios, f"openai:fake-model@{base}", "run-toolless", progress)
    assert summary.by_reason == {"completed": 1} and summary.turns == 4 and summary.ehr_requests == 0
    warning = no_tools_warning(summary)
    assert warning is not None and "4 turns without one EHR request" in warning
    assert "--chat_format chatml-function-calling" in warning
    assert "4 turns answered and not one EHR request yet" in out.getvalue()  # said during the run


def test_the_early_warning_waits_for_enough_turns_and_holds_back_once_the_ehr_was_read() -> None:
    progress, out = quiet_progress([])
    for turn in range(EARLY_TURNS - 1):
        progress.turn(TurnProgress("s1", "sc", turn, 8, 1, True, 1.0, ehr_requests=0))
    assert "warning" not in out.getvalue()
    reading, reading_out = quiet_progress([])
    for turn in range(EARLY_TURNS + 2):
        reading.turn(TurnProgress("s2", "sc", turn, 8, 1, True, 1.0, ehr_requests=3))
    assert "warning" not in reading_out.getvalue()


def test_every_failure_reason_is_listed_with_its_count_then_the_rest_counted(settings, scenarios, model):
    fake, base = model
    fake.reset(text(fake, None))
    progress, _ = quiet_progress(jobs(scenarios))
    (failed,) = run(settings, scenarios, f"openai:fake-model@{base}", "run-reasons", progress).outcomes
    outcomes = ([replace(failed, session_id=f"a{i}") for i in range(5)]
                + [replace(failed, session_id="t0", reason="timeout", error="no answer in 600 s")]
                + [replace(failed, session_id="ok", reason="completed", error=None)])
    lines = failure_lines(outcomes)
    assert lines[0] == "assistant_error: 5 sessions"
    assert [line.split()[0] for line in lines[1:4]] == ["a0", "a1", "a2"] and lines[4] == "  and 2 more"
    assert lines[5] == "timeout: 1 session"
    assert lines[6].startswith("  t0 ") and "no answer in 600 s" in lines[6]
    assert len(lines) == 7  # completed sessions are not failures


def test_the_report_of_a_run_that_never_started_says_so_not_score_it(settings, scenarios, model) -> None:
    fake, base = model
    progress, _ = quiet_progress(jobs(scenarios))
    with pytest.raises(EndpointUnavailable):
        run(settings, scenarios, f"openai:typo@{base}", "run-refused", progress)
    with pytest.raises(ReportUnavailable) as refused:
        load_report(root_on(settings), "run-refused")
    assert "it never started" in str(refused.value) and "rounds score" not in str(refused.value)
    assert "rounds run --scenarios FILE --assistant SPEC --run-id run-refused" in str(refused.value)


def test_an_interrupted_run_is_told_to_resume_with_its_assistant() -> None:
    from types import SimpleNamespace

    def event(kind: str, subject: str, **data):
        return SimpleNamespace(type=kind, subject=subject, data={"runId": "r1", **data})

    events = [event("rounds.session.started", "s1", assistant="openai:m@http://127.0.0.1:8000/v1"),
              event("rounds.session.started", "s2"), event("rounds.session.started", "s3"),
              event("rounds.session.ended", "s1", reason="completed"),
              event("rounds.session.ended", "s2", reason="interrupted"),
              event("rounds.session.started", "other", runId="r2")]
    state = run_state(events, "r1")
    assert (state.started, state.open, state.ended["interrupted"]) == (3, 1, 1)
    said = next_step(state, "r1")
    assert "was interrupted (3 sessions started: 1 ended, 1 interrupted, 1 never ended)" in said
    assert "rounds run --scenarios FILE --assistant openai:m@http://127.0.0.1:8000/v1 --run-id r1" in said
    assert "rounds score --run r1" in next_step(RunState(2, Counter(completed=2)), "r1")


def test_the_readme_agrees_with_rounds_run_help() -> None:
    """Every flag job 1 of the README names exists, and the reasons it says `--retry-failed` reruns are
    exactly those the end-reason table retries (beyond the interrupted ones every resume reruns)."""
    import re
    from pathlib import Path

    from typer.testing import CliRunner

    from contracts.end_reasons import RESUMED, RETRIED
    from rounds.cli import app

    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    job1 = readme[readme.index("### 1. Test an assistant"):readme.index("### 2. Replay")]
    runner = CliRunner()
    helped = "".join(runner.invoke(app, [command, "--help"], env={"COLUMNS": "400"}).stdout
                     for command in ("run", "report"))
    flags = set(re.findall(r"(--[a-z][a-z-]*[a-z])(?![a-z_])", job1))  # not llama-cpp-python's --n_ctx
    missing = sorted(f for f in flags if f not in helped)
    assert len(flags) > 10 and not missing, f"README job 1 names flags rounds does not have: {missing}"
    said = job1[job1.index("`--retry-failed` also reruns"):].split(";")[0]
    assert set(re.findall(r"`([a-z_]+)`", said)) == set(RETRIED - RESUMED)
