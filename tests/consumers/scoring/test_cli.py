"""`rounds score` / `rounds report --run` on the embedded default, fresh scenario definitions, bad input."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from rounds.cli import app
from services.consumers.scoring.scorer import SCORER_VERSION
from tests.consumers.scoring import world
from tests.consumers.scoring.conftest import World

runner = CliRunner()


def _flat(output: str) -> str:
    """The output without the error box's borders and line breaks (a long path wraps inside the box)."""
    return "".join(ch for ch in output if ch not in "│\n ")


def _args(w: World, *extra: str) -> list[str]:
    return ["score", "--topic", w.sessions, "--scores-topic", w.scores, "--database-url",
            w.settings.database_url, *extra]


def test_score_then_report_and_fresh_definitions(scoring_world: World, tmp_path: Path) -> None:
    w = scoring_world
    for trial, style in enumerate(["oracle", "wrong_dose"]):
        session = w.session().start(w.scenario, "cli-run", trial=trial)
        world.play(session, w.scenario, style)
        session.end(run="cli-run")
    result = runner.invoke(app, _args(w, "--run", "cli-run"))
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert summary["sessions"] == 2 and summary["turns"] == 8 and summary["scorer_version"] == SCORER_VERSION

    # a fresh definition that wants 5 mg: the wrong dose now passes its write check, the 2.5 mg order fails
    fresh = w.scenario.model_dump(mode="json")
    dose = fresh["turns"][3]["writes"][0]["constraints"][3]
    dose["value"] = 5
    fresh["turns"][3]["writes"][0]["resource"]["dosageInstruction"][0]["doseAndRate"][0]["doseQuantity"][
        "value"] = 5
    scenarios = tmp_path / "fresh.jsonl"
    scenarios.write_text(json.dumps(fresh) + "\n")
    out = tmp_path / "fresh.json"
    result = runner.invoke(app, _args(w, "--run", "cli-run", "--scenarios", str(scenarios),
                                      "--scorer-version", "fresh", "--json", str(out)))
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    writes = {s["trial"]: s["turns"][3]["checks"][0]["passed"] for s in doc["sessions"]}
    assert writes == {0: False, 1: True}

    report = tmp_path / "report.json"
    shown = runner.invoke(app, ["report", "--run", "cli-run", "--database-url", w.settings.database_url,
                                "--scorer-version", SCORER_VERSION, "--json", str(report)])
    assert shown.exit_code == 0, shown.output
    assert json.loads(report.read_text())["metrics"]["turns"] == 8
    latest = runner.invoke(app, ["report", "--run", "cli-run", "--database-url", w.settings.database_url])
    assert latest.exit_code == 0 and "fresh" in latest.output
    unknown = runner.invoke(app, ["report", "--run", "cli-run", "--database-url", w.settings.database_url,
                                  "--scorer-version", "nope"])
    assert unknown.exit_code == 1 and "no scores" in unknown.output


def test_bad_scenario_file_and_unknown_run(scoring_world: World, tmp_path: Path) -> None:
    w = scoring_world
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n')
    result = runner.invoke(app, _args(w, "--run", "r", "--scenarios", str(bad)))
    assert result.exit_code == 2 and "bad.jsonl:1" in _flat(result.output)
    empty = runner.invoke(app, _args(w, "--run", "never-ran"))
    assert empty.exit_code == 1 and "no ended session" in empty.output
