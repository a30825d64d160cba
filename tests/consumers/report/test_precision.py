"""The precision rule as the report shows it: sessions scored by the real v3 scorer, their report built by the
scorer's metrics and rendered; each turn lists its wrong claims and unasked-for results, the summary counts
them over the run."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup

from contracts.score import RunReport
from services.consumers.report.html_page import render_html
from services.consumers.scoring.metrics import build_report
from services.consumers.scoring.scorer import score_session
from tests.consumers.scoring.v3.v3_world import SCENARIO, log

CLEAN = "Her latest creatinine is 1.8 mg/dL; glucose 126 mg/dL."
WRONG = "Her latest creatinine is 1.8 mg/dL, earlier 3.3 mg/dL; glucose 126 mg/dL."
DUMP = CLEAN + " " + " ".join(f"sodium {130 + i} mEq/L;" for i in range(12))


def _session(answer: str, sid: str):
    session, state = log({0: answer})
    score = score_session(session, SCENARIO, state, version="3")
    return score.model_copy(update={"session": sid})


@pytest.fixture(scope="module")
def report() -> RunReport:
    return build_report("run-precision", "3", [_session(CLEAN, "clean"), _session(WRONG, "wrong"),
                                                _session(DUMP, "dump")])


def _first_turn(soup: BeautifulSoup, sid: str):
    return soup.select_one(f'details[data-session="{sid}"] .turn[data-turn="0"]')


def test_each_turn_shows_its_wrong_claims_and_unasked_results(report: RunReport) -> None:
    soup = BeautifulSoup(render_html(report), "html.parser")
    wrong = _first_turn(soup, "wrong").select_one(".precision")
    assert (wrong["data-wrong"], wrong["data-extra"], wrong["data-beyond"]) == ("1", "0", "0")
    assert wrong["data-deducted"] == "true" and float(wrong["data-factor"]) == 0.5
    claims = [li.get_text() for li in wrong.select("li.claim.wrong")]
    assert len(claims) == 1 and claims[0].startswith("3.3 mg/dL · ")  # the number, its unit, its subject
    assert "factor 0.50" in wrong.h4.get_text() and "× 0.5" in wrong.h4.get_text()

    dump = _first_turn(soup, "dump").select_one(".precision")
    assert (dump["data-extra"], dump["data-beyond"], dump["data-factor"]) == ("12", "8", "0.000000")
    extra = [li.get_text() for li in dump.select("li.claim.extra")]
    assert extra == [f"{130 + i} mEq/L · serum sodium" for i in range(12)]
    assert "budget 4, 8 beyond it × 0.2" in dump.h4.get_text()

    clean = _first_turn(soup, "clean").select_one(".precision")
    assert clean["data-deducted"] == "false" and clean["data-wrong"] == "0" and not clean.select("li.wrong")
    # the deductions are the scorer's own: the turn's score is its checks times this factor
    by_id = {s.session: s for s in report.sessions}
    assert by_id["dump"].turns[0].score == 0.0
    assert by_id["wrong"].turns[0].score < by_id["clean"].turns[0].score


def test_the_summary_counts_the_deductions_of_the_run(report: RunReport) -> None:
    m = report.metrics
    assert (m.precision_deducted_turns, m.wrong_claims, m.unasked_results_beyond_budget) == (2, 1, 8)
    soup = BeautifulSoup(render_html(report), "html.parser")
    rows = {tr["data-metric"]: tr.td.get_text() for tr in soup.select("table.metrics tr[data-metric]")}
    assert rows["precision deducted turns"] == "2"
    assert rows["wrong claims"] == "1" and rows["unasked results beyond budget"] == "8"


def test_a_turn_without_the_rule_shows_none_and_claim_text_is_escaped(report: RunReport) -> None:
    session = report.sessions[0]
    turn = session.turns[0]
    check = next(c for c in turn.checks if c.kind == "precision")
    hostile = {**check.precision, "wrong": [{"text": "<b id=x>9</b>", "subject": "<i>s</i>", "name": None}]}
    checks = [c if c is not check else c.model_copy(update={"precision": hostile}) for c in turn.checks]
    older = [c for c in turn.checks if c.kind != "precision"]  # a v2 turn: no precision check
    turns = [turn.model_copy(update={"checks": checks}),
             turn.model_copy(update={"index": 1, "checks": older})]
    doc = report.model_copy(update={"sessions": [session.model_copy(update={"turns": turns})]})
    soup = BeautifulSoup(render_html(doc), "html.parser")
    first, second = (soup.select_one(f'.turn[data-turn="{i}"]') for i in (0, 1))
    assert not first.select("#x") and "<b id=x>9</b>" in first.select_one("li.claim.wrong").get_text()
    assert second.select_one(".precision") is None


@pytest.mark.slow
def test_the_deductions_show_in_a_real_browser(report: RunReport, chromium, tmp_path) -> None:
    from tests.consumers.report.test_html_browser import _chromium

    page = tmp_path / "report.html"
    page.write_text(render_html(report), encoding="utf-8")
    dom = BeautifulSoup(_chromium(chromium, tmp_path, "--dump-dom", page.as_uri()).stdout, "html.parser")
    dump = _first_turn(dom, "dump").select_one(".precision")
    assert dump["data-beyond"] == "8" and len(dump.select("li.claim.extra")) == 12
    assert dom.select_one('table.metrics tr[data-metric="wrong claims"]').td.get_text() == "1"
