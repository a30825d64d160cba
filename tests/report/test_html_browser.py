"""The HTML page in a real browser (headless Chromium, Debian's package): what the rendered DOM shows after
the page's own script ran, that the script injected in an assistant answer did not run, and a screenshot."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from services.consumers.report.compare import compare_runs
from services.consumers.report.html_page import render_html

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _chromium(binary: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp / "profile"
    profile.mkdir(exist_ok=True)
    proc = subprocess.run(
        [str(binary), *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


@pytest.fixture(scope="module")
def page(baseline, replay, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("report") / "report.html"
    path.write_text(render_html(baseline, replay), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def dom(chromium, page, tmp_path_factory) -> BeautifulSoup:
    proc = _chromium(chromium, tmp_path_factory.mktemp("dump"), "--dump-dom", page.as_uri())
    return BeautifulSoup(proc.stdout, "html.parser")


def test_plots_are_drawn(dom, baseline, replay):
    charts = {svg["aria-label"]: svg for svg in dom.select("svg.chart")}
    assert len(charts) == 8  # 7 plots and the turn changes of the comparison
    for dim in ("family", "difficulty", "language", "variant"):
        bars = charts[f"mean turn score by {dim}"].select("rect.bar")
        assert len(bars) == 2 * len(baseline.by[dim]) and all(float(b["height"]) > 0 for b in bars)
    assert len(charts["Pass@Session against τ (every turn ≥ τ)"].select("circle.point")) == 2 * 101
    assert charts["Pass@Session against τ (every turn ≥ τ)"].select("polyline.curve")
    assert len(charts["pass^k against k (same scenario, k trials all pass)"].select("circle.point")) == 4
    latency = next(svg for label, svg in charts.items() if label.startswith("EHR call latency"))
    assert latency.select("rect.bin")


def test_tables_show_the_numbers(dom, baseline, replay):
    avg = dom.select_one('table.metrics tr[data-metric="Avg"]').select("td")
    assert [td.get_text() for td in avg] == [
        f"{baseline.metrics.avg:.3f}",
        "1.000",
        f"{1 - baseline.metrics.avg:+.3f}",
    ]
    excluded = dom.select_one('table.reasons.excluded tr[data-reason="infrastructure_error"]').select("td")
    assert [td.get_text() for td in excluded] == ["1", "1", "+0"]
    l1 = dom.select_one('table.by[data-dimension="difficulty"] tr[data-value="L1"]').select("td")
    b = baseline.by["difficulty"]["L1"].avg
    assert l1[1].get_text() == f"{b:.3f} → 1.000 ({1 - b:+.3f})"


def test_sessions_show_checks_and_the_script_ran(dom, baseline, replay):
    sections = dom.select("section.sessions")
    assert [s["data-run"] for s in sections] == ["run-baseline", "run-replay"]
    # the page's own script (allowed by its CSP hash) ran over both sections; no filter: everything shown
    assert all(s.get("data-ready") == "true" for s in sections)
    assert sections[0].select_one(".session-count").get_text() == str(len(baseline.sessions))
    assert not sections[0].select("details.session[hidden]")
    results = [td.get_text() for td in sections[0].select("tr.check td:nth-of-type(3)")]
    assert results.count("PASS") == sum(
        c.passed for s in baseline.sessions for t in s.turns for c in t.checks
    )
    assert results.count("FAIL") == sum(
        not c.passed for s in baseline.sessions for t in s.turns for c in t.checks
    )
    assert set(results) == {"PASS", "FAIL"}
    improved = dom.select('#compare tr.turn-delta[data-status="improved"]')
    assert len(improved) == compare_runs(baseline, replay).turn_counts["improved"]


def test_injected_script_did_not_run(dom):
    assert dom.title.get_text() == "Rounds report: run-baseline vs run-replay"
    assert not dom.select("#pwned") and not dom.body.has_attr("data-pwned")
    assert not dom.find_all("img")
    shown = [li.select_one(".text").get_text() for li in dom.select('li[data-kind="assistant"]')]
    assert any(text.startswith("<script>document.title='PWNED'") for text in shown)
    assert len(dom.find_all("script")) == 1


def test_screenshot(chromium, page, tmp_path):
    shot = tmp_path / "report.png"
    _chromium(chromium, tmp_path, "--window-size=1280,2400", f"--screenshot={shot}", page.as_uri())
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000  # a blank page is a few kB


def test_a_filter_in_the_link_hides_the_other_sessions(chromium, page, tmp_path, baseline):
    proc = _chromium(chromium, tmp_path, "--dump-dom", page.as_uri() + "#q=glucose-trend&reason=completed")
    section = BeautifulSoup(proc.stdout, "html.parser").select_one("section.sessions")
    shown = [d["data-session"] for d in section.select("details.session") if not d.has_attr("hidden")]
    expected = [
        s.session for s in baseline.sessions if s.scenario == "glucose-trend-003" and s.reason == "completed"
    ]
    assert shown == expected and 0 < len(shown) < len(baseline.sessions)
    assert section.select_one(".session-count").get_text() == str(len(expected))
