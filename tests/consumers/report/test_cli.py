"""`rounds report`: from a JSON document to the terminal table, the HTML page and the same JSON; with a
compared run; and the errors a user can make (both or neither source, a bad file, a version mismatch, no
scorer yet, an unwritable output)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from rounds.cli import app
from services.consumers.report.json_io import to_json

runner = CliRunner()


def said(result) -> str:
    """The output with rich's error box and line wrapping taken out."""
    return " ".join(result.output.replace("│", " ").split())


@pytest.fixture()
def files(tmp_path, baseline, replay):
    b, r = tmp_path / "baseline.json", tmp_path / "replay.json"
    b.write_text(to_json(baseline))
    r.write_text(to_json(replay))
    return b, r


def test_from_json_writes_the_page_and_the_same_document(files, tmp_path, baseline):
    b, _ = files
    html, out = tmp_path / "out.html", tmp_path / "out.json"
    result = runner.invoke(app, ["report", "--from-json", str(b), "--html", str(html), "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert f"{baseline.metrics.avg:.3f}" in result.output and "infrastructure_error" in result.output
    assert out.read_text() == b.read_text()
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "Rounds report: run-baseline" in page


def test_compare_json_puts_both_runs_in_the_table_and_the_page(files, tmp_path):
    b, r = files
    html = tmp_path / "cmp.html"
    result = runner.invoke(
        app, ["report", "--from-json", str(b), "--compare-json", str(r), "--html", str(html)]
    )
    assert result.exit_code == 0, result.output
    assert "run-replay" in result.output and "regressed" in result.output
    assert 'id="compare"' in html.read_text()


def test_html_sessions_caps_the_listed_sessions(files, tmp_path, baseline):
    b, _ = files
    for cap, listed in (("3", 3), ("0", len(baseline.sessions))):
        html = tmp_path / f"cap{cap}.html"
        result = runner.invoke(
            app, ["report", "--from-json", str(b), "--html", str(html), "--html-sessions", cap]
        )
        assert result.exit_code == 0, result.output
        assert html.read_text().count('<details class="session"') == listed
    assert runner.invoke(app, ["report", "--from-json", str(b), "--html-sessions", "-1"]).exit_code == 2


def test_scorer_version_must_match_the_document(files):
    b, _ = files
    ok = runner.invoke(app, ["report", "--from-json", str(b), "--scorer-version", "v2"])
    assert ok.exit_code == 0
    bad = runner.invoke(app, ["report", "--from-json", str(b), "--scorer-version", "v9"])
    assert bad.exit_code == 2 and "not 'v9'" in said(bad)


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--run", "r1", "--from-json", "x.json"],
        ["--from-json", "a.json", "--compare", "r2", "--compare-json", "b.json"],
    ],
)
def test_bad_combinations_are_usage_errors(args):
    result = runner.invoke(app, ["report", *args])
    assert result.exit_code == 2


def test_a_bad_document_is_reported(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"run": "r"}))
    result = runner.invoke(app, ["report", "--from-json", str(bad)])
    assert result.exit_code == 2 and "not a scored-run document" in said(result)
    missing = runner.invoke(app, ["report", "--from-json", str(tmp_path / "none.json")])
    assert missing.exit_code == 2 and "cannot read" in said(missing)


def test_run_without_a_scorer_points_to_from_json(tmp_path):
    result = runner.invoke(app, ["report", "--run", "r1", "--database-url", f"sqlite:///{tmp_path}/x.sqlite"])
    assert result.exit_code == 1 and "--from-json" in said(result)


def test_an_unwritable_output_is_an_error(files, tmp_path):
    b, _ = files
    result = runner.invoke(
        app, ["report", "--from-json", str(b), "--html", str(tmp_path / "no" / "dir.html")]
    )
    assert result.exit_code == 1 and "cannot write" in said(result)
