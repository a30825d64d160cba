"""The HTML page as written: self-contained (nothing to fetch), every plot drawn from the document's numbers,
summary tables, the per-session view and the turn-by-turn comparison, and everything escaped."""

from __future__ import annotations

import re

import pytest
from bs4 import BeautifulSoup

from contracts.score import Metrics, RunReport
from services.consumers.report.compare import compare_runs
from services.consumers.report.html_page import render_html
from services.consumers.report.stats import ehr_latencies, scored_sessions
from tests.consumers.report.sample import INJECTION, shown


def _soup(*args) -> BeautifulSoup:
    return BeautifulSoup(render_html(*args), "html.parser")


def test_nothing_is_loaded_from_anywhere(baseline, replay):
    page = render_html(baseline, replay)
    soup = BeautifulSoup(page, "html.parser")
    for tag in soup.find_all(True):
        assert not ({"src", "href", "xlink:href", "srcset", "action"} & set(tag.attrs)), tag.name
    assert not soup.find_all(["link", "iframe", "object", "embed", "img", "base"])
    assert "url(" not in page and "@import" not in page
    # the only URL in the page is the SVG namespace, which is a name and is never fetched
    assert set(re.findall(r"https?://[^\s\"'<]+", page)) == {"http://www.w3.org/2000/svg"}
    scripts = soup.find_all("script")
    assert len(scripts) == 1 and not scripts[0].get("src")
    csp = soup.find("meta", attrs={"http-equiv": "Content-Security-Policy"})["content"]
    assert "default-src 'none'" in csp and "'sha256-" in csp and "unsafe-inline'; img" not in csp


def test_injected_markup_in_an_answer_is_text(baseline):
    soup = _soup(baseline)
    answers = [li.find(class_="text").get_text() for li in soup.select('li[data-kind="assistant"]')]
    assert INJECTION in answers
    assert len(soup.find_all("script")) == 1  # the page's own
    assert not soup.select("#pwned") and not soup.find_all("img")
    assert "&lt;script&gt;document.title" in render_html(baseline)


def test_metrics_reasons_and_breakdowns(baseline):
    soup = _soup(baseline)
    row = soup.select_one('table.metrics tr[data-metric="Avg"]')
    m = baseline.metrics
    assert row.select("td")[0].get_text() == shown(m.avg, m.ci95.avg)
    span = row.select_one("td span.ci")
    assert [float(span["data-lo"]), float(span["data-hi"])] == m.ci95.avg
    row = soup.select_one('table.metrics tr[data-metric="Pass@Session τ=0.6"]')
    assert row.select("td")[0].get_text() == shown(m.pass_at_session["0.6"], m.ci95.pass_at_session["0.6"])
    scored = {
        tr["data-reason"]: tr.td.get_text()
        for tr in soup.select("table.reasons:not(.excluded) tr[data-reason]")
    }
    assert scored == {r: str(n) for r, n in baseline.reasons.items() if r != "infrastructure_error"}
    excluded = {
        tr["data-reason"]: tr.td.get_text() for tr in soup.select("table.reasons.excluded tr[data-reason]")
    }
    assert excluded == {"infrastructure_error": "1"}
    dims = {t["data-dimension"] for t in soup.select("table.by")}
    assert dims == {"family", "difficulty", "language", "variant"}
    zh = soup.select_one('table.by[data-dimension="language"] tr[data-value="zh"]').select("td")
    assert zh[0].get_text() == str(baseline.by["language"]["zh"].sessions)
    zh_metrics = baseline.by["language"]["zh"]
    assert zh[1].get_text() == shown(zh_metrics.avg, zh_metrics.ci95.avg)


def test_plots_hold_the_documents_numbers(baseline, replay):
    soup = _soup(baseline, replay)
    charts = {svg["aria-label"]: svg for svg in soup.select("svg.chart")}
    family = charts["mean turn score by family"]
    bars = family.select("rect.bar")
    assert len(bars) == 2 * len(baseline.by["family"])
    values = {(b["data-category"], b["data-series"]): float(b["data-value"]) for b in bars}
    assert values[("lab_trend", "run-baseline")] == pytest.approx(
        baseline.by["family"]["lab_trend"].avg, abs=1e-6
    )
    assert values[("lab_trend", "run-replay")] == pytest.approx(1.0)
    for dim in ("difficulty", "language", "variant"):
        assert charts[f"mean turn score by {dim}"].select("rect.bar")
    curve = charts["Pass@Session against τ (every turn ≥ τ)"]
    points = [p for p in curve.select("circle.point") if p["data-series"] == "run-baseline"]
    assert len(points) == 101
    at = {round(float(p["data-x"]), 2): float(p["data-y"]) for p in points}
    assert at[0.6] == pytest.approx(baseline.metrics.pass_at_session["0.6"], abs=1e-6)
    assert at[0.75] == pytest.approx(baseline.metrics.pass_at_session["0.75"], abs=1e-6)
    assert len(curve.select("line.marker")) == 2
    k = charts["pass^k against k (same scenario, k trials all pass)"]
    ks = [(p["data-series"], float(p["data-x"]), float(p["data-y"])) for p in k.select("circle.point")]
    assert ("run-baseline", 2.0, pytest.approx(baseline.metrics.pass_hat_k["2"], abs=1e-6)) in ks
    assert len(ks) == 4
    latency = next(svg for label, svg in charts.items() if label.startswith("EHR call latency"))
    counts = [int(b["data-count"]) for b in latency.select("rect.bin") if b["data-series"] == "run-baseline"]
    assert sum(counts) == len(ehr_latencies(baseline)) > 0


def test_per_session_view_lists_conversation_calls_and_checks(baseline):
    soup = _soup(baseline)
    sessions = soup.select("details.session")
    assert len(sessions) == len(baseline.sessions)
    first, doc = sessions[0], baseline.sessions[0]
    turns = first.select("div.turn")
    assert [int(t["data-turn"]) for t in turns] == [t.index for t in doc.turns]
    turn1 = turns[1]
    kinds = [li["data-kind"] for li in turn1.select("ul.conversation > li")]
    assert kinds == [x.kind for x in doc.turns[1].exchanges]
    assert {"doctor", "ehr", "question", "patient", "assistant"} <= set(kinds)
    ehr = turn1.select_one('li[data-kind="ehr"]')
    call = doc.turns[1].exchanges[1]
    assert ehr.select_one(".method").get_text() == call.method == "GET"
    assert (
        ehr.select_one(".url").get_text() == "Observation?patient=p1&code=2160-0&_count=1"
    )  # with its query
    assert (
        ehr.select_one(".status")["data-status"] == str(call.status)
        and f"{call.latency_ms:.1f} ms" in ehr.get_text()
    )
    rows = turn1.select("tr.check")
    assert [(r["data-check"], r.select("td")[2].get_text()) for r in rows] == [
        (c.id, "PASS" if c.passed else "FAIL") for c in doc.turns[1].checks
    ]
    assert rows[0].select_one("td.evidence").get_text() == doc.turns[1].checks[0].evidence
    clar = [li.select_one(".who").get_text() for li in turns[2].select('li[data-kind="clarification"]')]
    assert clar == ["Assistant (clarification)", "Doctor (clarification)"]
    excluded = soup.select('details.session[data-excluded="true"]')
    assert len(excluded) == 1 and excluded[0].select_one(".score").get_text() == "excluded"
    failing = soup.select('details.session[data-failing="true"]')
    assert len(failing) == len([s for s in scored_sessions(baseline) if min(t.score for t in s.turns) < 0.75])


def test_turn_by_turn_comparison(baseline, replay):
    soup = _soup(baseline, replay)
    comparison = compare_runs(baseline, replay)
    rows = soup.select("#compare tr.turn-delta")
    assert len(rows) == sum(len(p.turns) for p in comparison.pairs)
    improved = [r for r in rows if r["data-status"] == "improved"]
    assert len(improved) == comparison.turn_counts["improved"] > 0
    row = improved[0]
    before, after, delta = (td.get_text() for td in row.select("td.num")[1:4])
    assert float(after) > float(before) and delta.startswith("+")
    assert "FAIL → PASS" in row.get_text()
    assert len(soup.select("section.sessions")) == 2  # both runs' sessions
    chart = soup.select_one('#compare svg.chart[data-chart="bar"]')
    bars = {(b["data-category"], b["data-series"]): float(b["data-value"]) for b in chart.select("rect.bar")}
    for index in (0, 1, 2, 3):
        improved = sum(
            1 for p in comparison.pairs for t in p.turns if t.index == index and t.status == "improved"
        )
        assert bars[(f"turn {index}", "improved")] == improved and bars[(f"turn {index}", "regressed")] == 0
    assert sum(v for (_, s), v in bars.items() if s == "improved") == comparison.turn_counts["improved"]
    excluded = [tr.get_text(" ") for tr in soup.select("#compare tr.excluded")]
    assert excluded == ["k-replacement-002 #2 (en explicit) excluded: infrastructure_error"]


def test_odd_names_are_escaped_in_tables_and_charts(baseline):
    by = dict(baseline.by)
    by["family"] = {'<b>x</b>&"q"': Metrics(avg=0.5, sessions=1)}
    soup = _soup(baseline.model_copy(update={"by": by, "run": "<i>run</i>"}))
    assert soup.select_one("rect.bar")["data-category"] == '<b>x</b>&"q"'
    assert not soup.find_all(["b", "i"])
    assert soup.h1.get_text() == "Rounds report: <i>run</i>"


def test_an_empty_run_renders(tmp_path):
    soup = _soup(RunReport(run="empty", scorer_version="v1", metrics=Metrics()))
    assert len(soup.select("svg.chart")) == 7  # four dimensions, τ curve, pass^k, latency
    assert all(svg.select_one("text.empty") for svg in soup.select("svg.chart"))
    assert soup.select_one('table.metrics tr[data-metric="Avg"] td').get_text() == "–"


def test_unreached_turns_judge_verdicts_and_extra_metrics(baseline):
    soup = _soup(baseline)
    timeout = soup.select_one('details.session[data-reason="timeout"]')
    last = timeout.select("div.turn")[-1]
    assert last["data-reached"] == "false" and "not reached" in last.h3.get_text()
    assert not last.select("tr.check")
    judged = next(t for s in baseline.sessions for t in s.turns if getattr(t, "judge_agreement", None))
    session = next(s for s in baseline.sessions if judged in s.turns)
    turn = soup.select_one(
        f'details.session[data-session="{session.session}"] div.turn[data-turn="{judged.index}"]'
    )
    cells = [td.get_text() for td in turn.select("td.judge")]
    expected = [
        f"{'PASS' if e['judge'] else 'FAIL'} ({'agrees' if e['judge'] == e['check'] else 'disagrees'})"
        for e in judged.judge_agreement
    ]
    assert cells == expected and any("disagrees" in c for c in cells)
    assert not soup.select_one(
        'details.session[data-session="run-baseline-s01"] td.judge'
    )  # not judged there
    judge = [tuple(td.get_text() for td in tr.select("td")) for tr in soup.select("table.judge tr")]
    assert ("model", "judge-model-1") in judge and ("agreement", "0.83") in judge
    turns = [t for s in baseline.sessions for t in s.turns]
    entries = [e for t in turns for e in getattr(t, "judge_agreement", None) or []]
    agree = sum(e["judge"] == e["check"] for e in entries)
    counted = soup.select_one("tr.judge-agreement")
    assert (int(counted["data-agree"]), int(counted["data-total"])) == (agree, len(entries))
    assert 0 < agree < len(entries) and f"({agree}/{len(entries)})" in counted.get_text()
    row = soup.select_one('table.metrics tr[data-metric="safety failures"]')
    assert row.td.get_text() == str(baseline.metrics.safety_failures) and baseline.metrics.safety_failures > 0


def test_a_large_run_lists_the_sessions_worth_a_look_first(baseline, replay):
    soup = _soup(baseline, replay, 5)
    listed = soup.select('section.sessions[data-run="run-baseline"] details.session')
    assert len(listed) == 5
    notable = [
        s.session
        for s in baseline.sessions
        if s.reason == "infrastructure_error" or min((t.score for t in s.turns), default=0) < 0.75
    ]
    assert len(notable) > 5 and [d["data-session"] for d in listed] == notable[:5]  # in the run's order
    note = soup.select_one('section.sessions[data-run="run-baseline"] p.capped')
    assert (note["data-shown"], note["data-total"]) == ("5", str(len(baseline.sessions)))
    # the replay passes everything: only its excluded session is notable, the rest fill up in order
    replay_listed = [
        d["data-session"] for d in soup.select('section.sessions[data-run="run-replay"] details')
    ]
    assert replay_listed == [s.session for s in replay.sessions[:4]] + [replay.sessions[-1].session]
    pairs = {r["data-session"] for r in soup.select("#compare tr.turn-delta")}
    assert len(pairs) == 5 and soup.select_one("#compare p.capped")["data-total"] == str(
        len(baseline.sessions)
    )
    assert all(soup.select(f'#compare tr.improved[data-session="{p}"]') for p in pairs)
    counts = soup.select_one('#compare [data-count="improved"]').get_text()
    assert counts == f"{compare_runs(baseline, replay).turn_counts['improved']} improved"  # over every pair
    assert not _soup(baseline, replay).select("p.capped")


def test_more_runs_side_by_side(baseline, replay):
    third = replay.model_copy(update={"run": "run-weak", "assistant": "weak"})
    soup = _soup(baseline, replay, None, None, [third])
    avg = soup.select_one('table.metrics tr[data-metric="Avg"]').select("td")
    assert [td.get_text().split(" [")[0] for td in avg] == [f"{baseline.metrics.avg:.3f}", "1.000", "1.000"]
    assert [th.get_text() for th in soup.select("table.metrics thead th")][1:] == [
        "run-baseline",
        "run-replay",
        "run-weak",
    ]
    family = soup.select_one('svg.chart[aria-label="mean turn score by family"]')
    assert {b["data-series"] for b in family.select("rect.bar")} == {"run-baseline", "run-replay", "run-weak"}
    assert [s["data-run"] for s in soup.select("section.sessions")] == [
        "run-baseline",
        "run-replay",
        "run-weak",
    ]
    assert len(soup.select("#compare")) == 1  # the turn comparison stays between the first two
    assert soup.title.get_text() == "Rounds report: run-baseline vs run-replay vs run-weak"
    assert "also run-weak (scorer v2, assistant weak" in soup.select_one("p.meta").get_text()
