"""`load_report`: the scoring package's `load_report(engine, run, version)` is the source of `--run`; a run
with no stored scores and an installation without the scorer are errors that say what to do."""

from __future__ import annotations

import sys
import types

import pytest
from sqlalchemy.exc import OperationalError
from typer.testing import CliRunner

from contracts.score import RunReport
from rounds.cli import app
from rounds.settings import Settings
from services.consumers.report.source import SCORING_API, ReportUnavailable, load_report
from tests.wiring import root_on


@pytest.fixture()
def fake_scorer(monkeypatch, baseline, replay):
    """A stand-in scoring API holding two scored runs (the real one reads the score projections)."""
    calls = []
    stored = {(baseline.run, "v2"): baseline, (replay.run, "v2"): replay}

    def fake_load(engine, run, version=None):
        calls.append((str(engine.url), run, version))
        if run == "broken":
            raise OperationalError("SELECT", {}, Exception("no such table"))
        found = stored.get((run, version or "v2"))
        return found or RunReport(
            run=run, scorer_version=version or "v2", metrics=baseline.metrics.__class__()
        )

    module = types.ModuleType(SCORING_API)
    module.load_report = fake_load
    monkeypatch.setitem(sys.modules, SCORING_API, module)
    return calls


def test_the_scorers_document_is_returned(fake_scorer, baseline, tmp_path):
    url = f"sqlite:///{tmp_path}/r.sqlite"
    assert load_report(root_on(Settings(database_url=url)), "run-baseline") == baseline
    assert fake_scorer == [(url, "run-baseline", None)]
    assert load_report(root_on(Settings(database_url=url)), "run-baseline", "v2") == baseline


def test_a_run_without_scores_is_an_error(fake_scorer, tmp_path):
    settings = Settings(database_url=f"sqlite:///{tmp_path}/r.sqlite")
    with pytest.raises(ReportUnavailable, match="no scores for run 'nope': .* it never started"):
        load_report(root_on(settings), "nope")
    with pytest.raises(ReportUnavailable, match="at scorer version 'v7'.*--from-json"):
        load_report(root_on(settings), "run-baseline", "v7")
    with pytest.raises(ReportUnavailable, match="OperationalError"):
        load_report(root_on(settings), "broken")


def test_cli_run_and_compare_come_from_the_scorer(fake_scorer, tmp_path):
    html = tmp_path / "r.html"
    result = CliRunner().invoke(
        app,
        [
            "report",
            "--run",
            "run-baseline",
            "--compare",
            "run-replay",
            "--html",
            str(html),
            "--database-url",
            f"sqlite:///{tmp_path}/r.sqlite",
        ],
    )
    assert result.exit_code == 0, result.output
    assert [c[1] for c in fake_scorer] == ["run-baseline", "run-replay"]
    assert "Δ = run-replay − run-baseline" in html.read_text()


def test_without_the_scorer_installed(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, SCORING_API, None)  # import of it raises ModuleNotFoundError
    with pytest.raises(ReportUnavailable, match="no scorer"):
        load_report(root_on(Settings(database_url=f"sqlite:///{tmp_path}/r.sqlite")), "r1")
