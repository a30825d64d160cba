"""The model section of the report: latency per call and per turn, tokens per turn and per session, cost."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from bs4 import BeautifulSoup
from rich.console import Console

from services.consumers.report.html_page import render_html
from services.consumers.report.json_io import read_json, to_json
from services.consumers.report.model_usage import Call, calls_of_run, summarise, usage_table


def test_latency_tokens_and_cost_are_summarised_per_call_turn_and_session() -> None:
    calls = [Call("s1", 0, 100, 1000, 10, 0), Call("s1", 0, 300, 1500, 20, 1),
             Call("s1", 1, 200, 2000, 30, 0), Call("s2", 0, 1000, 500, 40, 0)]
    usage = summarise(calls, prompt_price=2.0, completion_price=10.0)
    assert (usage.calls, usage.turns, usage.sessions, usage.retries) == (4, 3, 2, 1)
    assert (usage.latency_ms_per_call.p50, usage.latency_ms_per_call.p95) == (200, 1000)
    assert usage.latency_ms_per_turn.p50 == 400  # turns: 400, 200, 1000
    assert usage.prompt_tokens_per_turn.mean == pytest.approx(5000 / 3)
    assert usage.prompt_tokens_per_session.total == 5000 and usage.completion_tokens_per_session.p95 == 60
    assert usage.cost_usd == pytest.approx((5000 * 2 + 100 * 10) / 1e6)
    console = Console(record=True, width=140)
    console.print(usage_table(usage))
    shown = console.export_text()
    assert "model calls: 4 in 3 turns of 2 sessions" in shown and "$0.0110" in shown
    assert summarise([]).cost_usd is None and summarise([]).latency_ms_per_call.p50 is None


def test_only_the_runs_sessions_count() -> None:
    def event(type_, subject, **data):
        return SimpleNamespace(type=type_, subject=subject, data=data)

    usage = {"latency_ms": 50, "prompt_tokens": 7, "completion_tokens": 3, "retries": 0}
    events = [event("rounds.tool.result", "a", turn=1, usage=usage),  # before its start: partitions
              event("rounds.session.started", "a", runId="r1"),
              event("rounds.session.started", "b", runId="r2"),
              event("rounds.tool.result", "b", turn=0, usage=usage), event("rounds.tool.result", "a", turn=1),
              None]
    assert calls_of_run(events, "r1") == [Call("a", 1, 50.0, 7, 3, 0)]


CALLS = [Call("s1", 0, 100, 1000, 10, 0), Call("s1", 0, 300, 1500, 20, 1), Call("s1", 1, 200, 2000, 30, 0),
         Call("s2", 0, 1000, 500, 40, 0)]


@pytest.mark.slow
def test_the_html_page_shows_the_model_section_in_a_real_browser(baseline, chromium, tmp_path) -> None:
    from tests.consumers.report.test_html_browser import _chromium

    usage = summarise(CALLS, prompt_price=2.0, completion_price=10.0).model_dump()
    saved = tmp_path / "report.json"
    saved.write_text(to_json(baseline.model_copy(update={"model_usage": usage})), encoding="utf-8")
    report = read_json(saved)  # as --from-json reads it
    page = tmp_path / "report.html"
    page.write_text(render_html(report), encoding="utf-8")
    dom = BeautifulSoup(_chromium(chromium, tmp_path, "--dump-dom", page.as_uri()).stdout, "html.parser")
    table = dom.select_one("#model table.model")
    assert "model calls: 4 in 3 turns of 2 sessions (1 retries)" in table.caption.get_text()
    cells = {tr["data-measure"]: [td.get_text() for td in tr.select("td")] for tr in table.select("tbody tr")}
    assert cells["latency per call"] == ["200 ms", "1.00 s", "400 ms", "1.60 s"]
    assert cells["prompt tokens per session"][3] == "5,000" and cells["prompt tokens per turn"][3] == ""
    assert "$0.0110 at $2 / $10 per million" in table.select_one("tfoot .cost").get_text()
    without = tmp_path / "plain.html"
    without.write_text(render_html(baseline), encoding="utf-8")
    plain = BeautifulSoup(_chromium(chromium, tmp_path, "--dump-dom", without.as_uri()).stdout, "html.parser")
    assert plain.select_one("#model") is None and plain.select_one("#summary") is not None
