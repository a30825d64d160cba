"""`rounds/physassist` run by Inspect itself with its `mockllm` provider (custom outputs that call Rounds'
tools): Inspect's log, Rounds' log and `rounds report` agree on every session's score."""

from __future__ import annotations

import json
import math

import pytest
from inspect_ai import eval as inspect_eval
from typer.testing import CliRunner

from contracts.score import RunReport
from events.archive import read_log
from events.catalog import CATALOG
from events.topics import SCORES, SESSIONS
from rounds.cli import app
from rounds.inspect.task import physassist
from rounds.settings import get_settings
from services.consumers.statistics.intervals import standard_errors
from tests.rounds.inspect.policy import scripted
from tests.wiring import bus_on

runner = CliRunner()
pytestmark = pytest.mark.slow  # each runs an Inspect eval (a few seconds)


def run(scenario_file, models, **task_args):
    policy = task_args.pop("policy", None) or scripted(models)
    eval_args = {k: task_args.pop(k) for k in list(task_args) if k in ("message_limit", "token_limit",
                                                                      "time_limit", "retry_on_error")}
    [log] = inspect_eval(physassist(scenarios=str(scenario_file), **task_args), model="mockllm/model",
                         model_args={"custom_outputs": policy}, display="none", **eval_args)
    return log


def logged_scores(settings, run_id: str) -> dict[str, float | None]:
    bus = bus_on(settings)
    try:
        scores = [(r.event.subject, CATALOG.payload(r.event)) for r in read_log(bus, [SCORES])
                  if r.event is not None and r.event.type == "rounds.score.session"]
        return {subject: score.score for subject, score in scores if score.run_id == run_id}
    finally:
        bus.close()


def assert_agreement(log, run_id: str, inspect_scores: dict[str, float], settings, tmp_path) -> None:
    """Rounds' log (`rounds.score.session` under the run id) and `rounds report` (its JSON) have the
    Inspect log's score for every session, and Inspect's metrics are the report's Avg / Pass@Turn /
    Pass@Session at 0.75."""
    assert {s.metadata["rounds"]["run"] for s in log.samples} == {run_id}
    assert logged_scores(settings, run_id) == inspect_scores
    out = tmp_path / "report.json"
    result = runner.invoke(app, ["report", "--run", run_id, "--json", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert {s["session"]: s["score"] for s in report["sessions"]} == inspect_scores
    metrics = log.results.scores[0].metrics
    assert metrics["avg"].value == report["metrics"]["avg"]
    assert metrics["pass_at_session"].value == report["metrics"]["pass_at_session"]["0.75"]
    assert metrics["pass_at_turn"].value == report["metrics"]["pass_at_turn"]["0.75"]
    errors = standard_errors(RunReport.model_validate(report))  # clustered by scenario, as `rounds report`
    for name in ("avg", "pass_at_turn", "pass_at_session"):
        shown = metrics[f"{name}_stderr"].value
        expected = errors[name]
        assert math.isclose(shown, expected, rel_tol=1e-12) or math.isnan(shown) and math.isnan(expected)


def test_inspect_log_rounds_log_and_report_agree(rounds_db, scenario_file, scenario_models, tmp_path):
    log = run(scenario_file, scenario_models, language="both")
    assert log.status == "success", [s.metadata.get("rounds") for s in log.samples or []] or log.error
    run_id = log.eval.eval_id
    samples = {s.id: s for s in log.samples}
    assert len(samples) == 2 * len(scenario_models)
    inspect_scores = {}
    for sample in samples.values():
        meta = sample.metadata["rounds"]
        assert meta["run"] == run_id and meta["reason"] == "completed"
        score = sample.scores["rounds_scorer"]
        assert score.metadata["session"] == meta["session"]
        turns = score.metadata["rounds"]["turns"]
        assert turns and all(t["checks"] for t in turns)  # per-turn checks, with evidence
        inspect_scores[meta["session"]] = score.value
    assert all(value > 0.5 for value in inspect_scores.values())  # the scripted model answers well
    assert_agreement(log, run_id, inspect_scores, rounds_db, tmp_path)  # the run id is the eval's id
    # `rounds score` re-scores the Inspect run from the log; `rounds replay` replays it with another assistant
    get_settings.cache_clear()  # the CLI reads ROUNDS_DATABASE_URL as this test set it
    rescored = tmp_path / "rescored.json"
    result = runner.invoke(app, ["score", "--run", run_id, "--json", str(rescored)])
    assert result.exit_code == 0, result.output
    assert {s["session"]: s["score"] for s in json.loads(rescored.read_text())["sessions"]} == inspect_scores
    result = runner.invoke(app, ["replay", "--run", run_id, "--assistant", "weak", "--run-id", "replayed-1"])
    assert result.exit_code == 0, result.output
    replayed = tmp_path / "replayed.json"
    assert runner.invoke(app, ["report", "--run", "replayed-1", "--json", str(replayed)]).exit_code == 0
    again = json.loads(replayed.read_text())["sessions"]
    assert len(again) == len(inspect_scores) and {s["assistant"] for s in again} == {"weak"}
    # every tool call the model made is on the session's log, as the openai: adapter records them
    bus = bus_on(rounds_db)
    try:
        session = next(iter(inspect_scores))
        types = [r.event.type for r in read_log(bus, [SESSIONS], session=session)]
    finally:
        bus.close()
    assert types[0] == "rounds.session.started" and "rounds.session.ended" in types
    assert {"rounds.tool.call", "rounds.tool.result", "rounds.ehr.request",
            "rounds.message.patient"} <= set(types)


def test_on_the_demo_scenarios_every_session_s_score_agrees(demo_scenarios, tmp_path, monkeypatch):
    """The scenarios `rounds demo` builds (synthetic patients through the mapper, the store and the builder),
    run from the folder the demo leaves them in with the task's defaults."""
    url, scenarios = demo_scenarios
    monkeypatch.setenv("ROUNDS_DATABASE_URL", url)
    monkeypatch.setenv("ROUNDS_BUS", "sql")
    monkeypatch.delenv("ROUNDS_FHIR_BASE", raising=False)
    monkeypatch.chdir(scenarios.parent.parent)  # -T scenarios defaults to rounds-demo/scenarios.jsonl
    from rounds.settings import Settings
    from services.simulator.orchestrator.jobs import read_scenarios

    models = [scenario for scenario, _ in read_scenarios(scenarios)]
    quality = {s.id: ("reference" if i % 2 == 0 else "vague") for i, s in enumerate(models)}
    policy = scripted(models, lambda scenario, turn: quality[scenario.id])
    [log] = inspect_eval(physassist(language="both", run_id="inspect-demo-1"), model="mockllm/model",
                         log_dir=str(tmp_path / "logs"),
                         model_args={"custom_outputs": policy}, display="none")
    assert log.status == "success", log.error
    assert len(log.samples) == 2 * len(models) >= 4
    inspect_scores = {s.metadata["rounds"]["session"]: s.scores["rounds_scorer"].value for s in log.samples}
    assert len(set(inspect_scores.values())) > 1  # varied scores to agree on
    assert_agreement(log, "inspect-demo-1", inspect_scores, Settings(database_url=url), tmp_path)


def test_against_a_separate_fhir_server(rounds_db, scenario_file, scenario_models, tmp_path):
    """`-T fhir_base=`: sandboxes opened on a separate FHIR server wired as `rounds serve` wires it (its
    recorder writes the EHR calls into the same log), the patient endpoint served beside the task, the scorer
    reading sandboxes from there."""
    from services.fhir_api.backbone.wiring import BackboneSettings, install_event_backbone
    from tests.simulator.adapters.conftest import Served
    from tests.wiring import app_on

    app = app_on(rounds_db)
    backbone = install_event_backbone(app, rounds_db, bus=bus_on(rounds_db), backbone=BackboneSettings())
    served = Served(app)
    try:
        log = run(scenario_file, scenario_models, fhir_base=f"{served.root}/fhir")
    finally:
        served.stop()
        backbone.close()
    assert log.status == "success", log.error
    [sample] = log.samples
    meta = sample.metadata["rounds"]
    assert meta["reason"] == "completed" and sample.scores["rounds_scorer"].value == 1.0
    assert_agreement(log, meta["run"], {meta["session"]: 1.0}, rounds_db, tmp_path)
    bus = bus_on(rounds_db)
    try:
        events = [r.event for r in read_log(bus, [SESSIONS], session=meta["session"])]
    finally:
        bus.close()
    assert events[0].data["fhirBase"].startswith(served.root)  # the sandbox is the server's
    assert any(e.type == "rounds.ehr.request" for e in events)


def test_epochs_are_trials_and_every_trial_counts_in_the_metrics(rounds_db, scenario_file, scenario_models):
    [log] = inspect_eval(physassist(scenarios=str(scenario_file)), model="mockllm/model", epochs=2,
                         model_args={"custom_outputs": scripted(scenario_models)}, display="none")
    assert log.status == "success", log.error
    assert sorted((s.epoch, s.metadata["rounds"]["trial"]) for s in log.samples) == [(1, 0), (2, 1)]
    [reduced] = log.reductions[0].samples
    assert sorted(t["trial"] for t in reduced.metadata["trials"]) == [0, 1]
    from foundation.db import make_engine
    from services.consumers.scoring.api import load_report

    engine = make_engine(rounds_db.database_url)
    try:
        report = load_report(engine, log.eval.eval_id)
    finally:
        engine.dispose()
    assert report.metrics.sessions == 2 and report.metrics.pass_hat_k == {"1": 1.0, "2": 1.0}
    metrics = log.results.scores[0].metrics
    assert metrics["avg"].value == report.metrics.avg
    assert metrics["pass_at_session"].value == report.metrics.pass_at_session["0.75"]
