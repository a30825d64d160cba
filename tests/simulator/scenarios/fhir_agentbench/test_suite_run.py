"""The suite end to end on the small question file: imported, run by `oracle` and `baseline:fhir-agentbench`
through real sandboxes (every EHR call on the log), scored from the log, reported with the suite's figures
and their breakdowns; and scored again with the peer's LLM judge (a fake OpenAI-compatible server)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from events.archive import read_log
from rounds.settings import Settings
from services.consumers.scoring.api import score_run
from services.consumers.scoring.judge import LlmJudge
from services.simulator.orchestrator.entry import RunOptions, run_scenarios
from services.simulator.orchestrator.jobs import plan, read_scenarios
from services.simulator.scenarios import output
from services.simulator.scenarios.fhir_agentbench.importer import import_questions
from services.simulator.scenarios.fhir_agentbench.rows import read_questions
from tests.consumers.scoring.test_judge import CALLS, fake_openai  # noqa: F401 - the fake judge's server (fixture)
from tests.wiring import app_on, bus_on, migrated, root_on

SMALL = Path(__file__).parent / "fixtures" / "questions_small.csv"


@pytest.fixture
def suite(record_url: str, tmp_path: Path) -> tuple[Settings, Path]:
    settings = Settings(database_url=record_url)
    imported = asyncio.run(import_questions(app_on(settings), read_questions(SMALL)))
    path = tmp_path / "fab.jsonl"
    output.write(path, imported.scenarios, imported.summary)
    return settings, path


def _run(settings: Settings, path: Path, spec: str, run_id: str):
    jobs = plan(read_scenarios(path), 1, ("en",), "implicit")
    summary = asyncio.run(run_scenarios(jobs, spec, RunOptions(run_id), migrated(settings)))
    assert set(summary.by_reason) == {"completed"}
    return score_run(root_on(settings), run_id, timeout_s=120)


def _answers(report) -> dict[str, bool]:
    return {s.scenario: c.passed for s in report.sessions for t in s.turns for c in t.checks
            if c.kind == "answer_correct"}


def test_oracle_and_baseline_figures(suite: tuple[Settings, Path]) -> None:
    settings, path = suite
    oracle = _run(settings, path, "oracle", "fab-oracle")
    m = oracle.model_dump()["metrics"]
    assert (m["answer_correctness"], m["retrieval_recall"]) == (1.0, 1.0), _answers(oracle)
    # the peer's precision: 0 when nothing was retrieved, so the 3 questions without gold count 0
    assert m["retrieval_precision"] == 0.75
    assert m["ci95"]["answer_correctness"][1] == 1.0
    by = oracle.model_dump()["answers"]["by"]
    assert by["main_table"]["labevents"]["questions"] == 7
    assert by["resource_type"]["Observation"]["retrieval_recall"] == 1.0
    assert len(by["template"]) == 12
    # every check of the suite reads the log: the oracle's reads returned exactly the gold
    checks = {c.kind: c for s in oracle.sessions if s.scenario == "fab-q-value" for t in s.turns
              for c in t.checks}
    assert checks["retrieval_recall"].measures["by_type"] == {"Observation": [1, 1]}
    assert checks["answer_correct"].weight == 1.0 and checks["retrieval_recall"].weight == 0.0

    base = _run(settings, path, "baseline:fhir-agentbench", "fab-base")
    b = base.model_dump()["metrics"]
    assert {k for k, ok in _answers(base).items() if ok} == {"fab-q-yes", "fab-q-value", "fab-q-time",
                                                            "fab-q-gender"}
    assert (b["answer_correctness"], b["retrieval_recall"], b["retrieval_precision"]) == (
        pytest.approx(4 / 12, abs=1e-6), 1.0, pytest.approx(5.4 / 12, abs=1e-6))


def test_report_json_and_terminal_carry_the_suite(suite: tuple[Settings, Path], tmp_path: Path) -> None:
    settings, path = suite
    env = {**os.environ, "ROUNDS_DATABASE_URL": settings.database_url, "COLUMNS": "200"}
    run = subprocess.run([sys.executable, "-m", "rounds.cli", "run", "--scenarios", str(path), "--assistant",
                          "oracle", "--language", "en", "--run-id", "fab-cli"],
                         capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    out = tmp_path / "fab.json"
    report = subprocess.run([sys.executable, "-m", "rounds.cli", "report", "--run", "fab-cli", "--json",
                             str(out), "--html", str(tmp_path / "fab.html")],
                            capture_output=True, text=True, timeout=600, env=env)
    assert report.returncode == 0, report.stderr[-2000:]
    assert "answers by main_table" in report.stdout and "answers by resource_type" in report.stdout
    metrics = json.loads(out.read_text())["metrics"]
    assert {"answer_correctness", "retrieval_recall", "retrieval_precision"} <= set(metrics)
    html = (tmp_path / "fab.html").read_text()
    assert 'data-breakdown="template"' in html and 'data-answers="labevents"' in html


def test_the_peer_s_judge_scores_beside_the_deterministic_check(suite: tuple[Settings, Path],
                                                               request: pytest.FixtureRequest) -> None:
    settings, path = suite
    url = request.getfixturevalue("fake_openai")
    _run(settings, path, "oracle", "fab-judged")
    before = len(CALLS)
    report = score_run(root_on(settings), "fab-judged", judge=LlmJudge.from_spec(f"openai:fake-judge@{url}"),
                       timeout_s=120)
    asked = CALLS[before:]
    assert len(asked) == 12  # one call per question, each with the peer's criterion and the gold
    assert all("Gold answer (the result of the question's SQL" in c["messages"][-1]["content"] for c in asked)
    assert report.judge is not None and report.judge["model"] == "fake-judge"
    verdicts = [c.passed for s in report.sessions for t in s.turns for c in t.checks if c.kind == "llm_judge"]
    metrics = report.model_dump()["metrics"]
    assert metrics["judge_correctness"] == pytest.approx(sum(verdicts) / len(verdicts))
    assert metrics["answer_correctness"] == 1.0  # the deterministic check is not the judge's
    bus = bus_on(settings)
    try:
        # this test's own store: its only judged run
        records = list(read_log(bus, ["rounds.scores"]))
        calls = [r.event.data for r in records if r.event.type == "rounds.score.judge"]
    finally:
        bus.close()
    assert len(calls) == 12  # every judge call an event: model, item, verdict, latency
    assert {(c["model"], c["item"]) for c in calls} == {("fake-judge", "llm_judge")}
    assert sorted(c["passed"] for c in calls) == sorted(verdicts)
    assert all(c["latencyMs"] >= 0 and c["runId"] == "fab-judged" for c in calls)
