"""The HTML page in a real browser (headless Chromium, Debian's package): what the rendered DOM shows after
the page's own script ran, that the script injected in an assistant answer did not run, and a screenshot."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from services.consumers.report.compare import compare_runs
from services.consumers.report.html_page import render_html
from tests.consumers.report.sample import shown

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


def _bar_errors(svg) -> list[tuple[float, float, float, float, float]]:
    """(bar top y, error bar top y, bottom y, data-lo, data-hi) for every bar drawn with an error bar at its
    centre."""
    found = []
    for bar in svg.select("rect.bar"):
        centre = float(bar["x"]) + float(bar["width"]) / 2
        for g in svg.select(f'g.error-bar[data-series="{bar["data-series"]}"]'):
            line = g.select_one("line")
            if abs(float(line["x1"]) - centre) < 0.11:
                found.append((float(bar["y"]), float(line["y1"]), float(line["y2"]), float(g["data-lo"]),
                              float(g["data-hi"])))
    return found


def test_every_bar_chart_draws_the_intervals_as_error_bars(dom, baseline, replay):
    """Each Avg bar of a breakdown with two or more scenarios carries its 95 % interval from the document as a
    capped vertical line around the bar's top; a value from one scenario has no interval and no bar."""
    charts = {svg["aria-label"]: svg for svg in dom.select("svg.chart")}
    for dim in ("family", "difficulty", "language", "variant"):
        svg = charts[f"mean turn score by {dim}"]
        expected = sorted(tuple(m.ci95.avg) for r in (baseline, replay) for m in r.by[dim].values()
                          if m.ci95 and m.ci95.avg)
        drawn = _bar_errors(svg)
        assert sorted((lo, hi) for *_, lo, hi in drawn) == expected and expected
        for top, y_hi, y_lo, lo, _ in drawn:
            assert y_hi <= top + 0.11 <= y_lo + 0.2 and y_hi < y_lo  # the interval brackets the bar's top
            assert len(svg.select(f'g.error-bar[data-lo="{lo:.6f}"] line')) >= 3  # the line and its caps
    k = charts["pass^k against k (same scenario, k trials all pass)"]
    assert len(k.select("g.error-bar")) == sum(len(r.metrics.ci95.pass_hat_k) for r in (baseline, replay))


def test_tables_show_the_numbers(dom, baseline, replay):
    avg = dom.select_one('table.metrics tr[data-metric="Avg"]').select("td")
    m, r = baseline.metrics, replay.metrics
    assert [td.get_text() for td in avg] == [
        shown(m.avg, m.ci95.avg),
        shown(1.0, r.ci95.avg),
        f"{1 - baseline.metrics.avg:+.3f}",
    ]
    excluded = dom.select_one('table.reasons.excluded tr[data-reason="infrastructure_error"]').select("td")
    assert [td.get_text() for td in excluded] == ["1", "1", "+0"]
    l1 = dom.select_one('table.by[data-dimension="difficulty"] tr[data-value="L1"]').select("td")
    b = baseline.by["difficulty"]["L1"].avg
    assert l1[1].get_text() == f"{b:.3f} → 1.000 ({1 - b:+.3f})"  # L1 is one scenario: no interval


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
