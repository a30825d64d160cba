"""`rounds demo` runs the whole loop on the embedded default: record → scenarios → sessions → scores →
report."""

from __future__ import annotations

from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from rich.console import Console

from rounds.demo import run_demo
from rounds.demo_view import results_table
from services.consumers.report.json_io import read_json
from tests.consumers.report.test_html_browser import _chromium

pytestmark = pytest.mark.slow  # whole pipelines, subprocesses or real services: not in the fast lane

def test_demo_runs_every_assistant_through_scored_sessions(tmp_path: Path, sqlite_url: str, chromium) -> None:
    stages: list[str] = []
    result = run_demo(
        patients=3,
        seed=7,
        mimic=None,
        workdir=tmp_path / "w",
        database_url=sqlite_url,
        out=tmp_path / "out",
        sessions=6,
        step=stages.append,
    )
    assert result.figures["rejected_rows"] == 0
    assert result.figures["loaded_resources"] == result.figures["mapped_resources"] > 0
    assert stages[:4] == ["synthesize", "map", "load", "scenarios"]
    assert set(result.reports) == {"baseline", "oracle", "weak"}
    scenarios = result.figures["scenarios"]
    for report in result.reports.values():
        # every scenario ran in English and in Chinese; nothing was the infrastructure's fault
        assert report.metrics.sessions == 2 * scenarios and report.metrics.excluded_sessions == 0
        assert {s.language for s in report.sessions} == {"en", "zh"}
    avg = {spec: r.metrics.avg for spec, r in result.reports.items()}
    # the scorer tells the assistants apart: the oracle's upper bound, a real baseline, a weak floor
    assert avg["oracle"] > avg["baseline"] > avg["weak"]
    assert avg["weak"] < 0.2
    assert result.html is not None and result.html.exists()
    page = result.html.read_text(encoding="utf-8")
    assert result.reports["baseline"].run in page and "<svg" in page
    assert read_json(result.json["oracle"]).run == result.reports["oracle"].run
    # the report as a user opens it: headless Chromium shows the three runs, their plots and their sessions
    shown = _chromium(chromium, tmp_path, "--dump-dom", result.html.as_uri()).stdout
    dom = BeautifulSoup(shown, "html.parser")
    headers = " ".join(th.get_text() for th in dom.select("#summary table th"))
    assert all(report.run in headers for report in result.reports.values())
    assert len(dom.select("#plots svg")) >= 4 and dom.select("#plots svg rect")
    assert dom.find(string=lambda text: text and "PASS" in text) is not None
    assert dom.select("#plots g.error-bar")  # the breakdowns' 95 % intervals
    # the demo's table: each figure with its interval clustered by scenario
    console = Console(record=True, width=250, color_system=None)
    console.print(results_table(result))
    lo, hi = result.reports["baseline"].metrics.ci95.avg
    assert f"{avg['baseline']:.2f} [{lo:.2f}, {hi:.2f}]" in console.export_text()

# What `rounds demo` prints (the results table, the report's path): tests/rounds/demo/test_readme.py, on the
# run its
# jobs start from.
