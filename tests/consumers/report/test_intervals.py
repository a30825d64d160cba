"""Every figure of a scored run carries its 95 % interval clustered by scenario, in the scorer's document (the
JSON: `ci95`, `n_clusters`, `method`), on the terminal and in the page; `--compare` adds the paired test in
words and lists the sessions it could not pair; `--power` the scenarios a difference needs."""

from __future__ import annotations

import json

from bs4 import BeautifulSoup
from typer.testing import CliRunner

from rounds.cli import app
from services.consumers.report.json_io import to_json
from services.consumers.scoring.metrics import build_report
from services.consumers.statistics.clustered import METHOD

runner = CliRunner()


def _inside(value: float, bounds: list[float]) -> bool:
    return bounds[0] - 1e-6 <= value <= bounds[1] + 1e-6


def test_the_scorer_s_document_carries_every_interval(baseline):
    def typed(t):
        return t.model_copy(update={"task_type": ("lookup", "trend")[t.index % 2]})

    sessions = [s.model_copy(update={"turns": [typed(t) for t in s.turns]}) for s in baseline.sessions]
    report = build_report("run", "v2", sessions)
    m = report.metrics
    assert m.n_clusters == len({s.scenario for s in sessions}) and m.method == METHOD
    assert _inside(m.avg, m.ci95.avg)
    for tau in ("0.6", "0.75"):
        assert _inside(m.pass_at_turn[tau], m.ci95.pass_at_turn[tau])
        assert _inside(m.pass_at_session[tau], m.ci95.pass_at_session[tau])
    assert set(m.ci95.pass_hat_k) == set(m.pass_hat_k)
    for dimension, values in report.by.items():
        for value, metrics in values.items():
            assert metrics.method == METHOD, (dimension, value)
            if metrics.n_clusters >= 2:
                assert _inside(metrics.avg, metrics.ci95.avg)
            else:
                assert metrics.ci95.avg is None  # one scenario: its spread is unknown
    lookup = report.by["task_type"]["lookup"].ci95
    assert lookup.avg and not lookup.pass_at_session  # a task type's figures are its turns'
    doc = json.loads(to_json(report))["metrics"]
    assert {"ci95", "n_clusters", "method"} <= doc.keys() and len(doc["ci95"]["avg"]) == 2


def test_a_document_without_intervals_gets_them_from_its_sessions(tmp_path, baseline):
    old = json.loads(to_json(baseline))
    for metrics in [old["metrics"], *[m for values in old["by"].values() for m in values.values()]]:
        for name in ("ci95", "n_clusters", "method"):
            metrics.pop(name)
    path, out = tmp_path / "old.json", tmp_path / "out.json"
    path.write_text(json.dumps(old))
    result = runner.invoke(app, ["report", "--from-json", str(path), "--json", str(out)], terminal_width=200)
    assert result.exit_code == 0, result.output
    lo, hi = baseline.metrics.ci95.avg
    assert f"{baseline.metrics.avg:.3f} [{lo:.3f}, {hi:.3f}]" in result.output
    assert json.loads(out.read_text())["metrics"]["ci95"] == json.loads(to_json(baseline))["metrics"]["ci95"]


def test_compare_tests_the_difference_lists_the_unpaired_and_plans(tmp_path, baseline, replay):
    short = replay.model_copy(update={"sessions": replay.sessions[1:]})
    a, b, page = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "page.html"
    a.write_text(to_json(baseline))
    b.write_text(to_json(short))
    result = runner.invoke(app, ["report", "--from-json", str(a), "--compare-json", str(b), "--power",
                                 "--power-d", "0.1", "--html", str(page)], terminal_width=200)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "too few scenarios (5) to test at 95 %" in text  # 2^5 sign patterns: p ≥ 0.0625
    assert "McNemar exact" in text and "2 sessions not paired" in text and "only in run-baseline" in text
    assert "to detect a difference of 0.100" in text and "from the paired differences" in text
    assert "1 trial per task:" in text and "within-task variance" in text
    soup = BeautifulSoup(page.read_text(), "html.parser")
    assert soup.select_one("#paired p.verdict").get_text().startswith("too few scenarios (5)")
    assert len(soup.select("#paired li.unmatched")) == 2
    avg = soup.select_one('#paired tr[data-figure="Avg (matched turns)"]')
    assert float(avg["data-lo"]) <= float(avg["data-delta"]) <= float(avg["data-hi"])
    assert "to detect a difference of 0.100" in soup.select_one("#planning").get_text()
