"""The model section of the report: latency per call and per turn, tokens per turn and per session, cost."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from rich.console import Console

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
