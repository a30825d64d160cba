"""The figures the report derives from the document: the Pass@Session curve over τ, reason counts with
excluded sessions apart, EHR latencies, histograms, percentiles, pass^k ordering."""

from __future__ import annotations

import pytest

from contracts.score import Exchange, Metrics, RunReport, SessionScore, TurnScore
from services.consumers.report.stats import (
    ehr_latencies,
    histogram,
    pass_at_session_curve,
    pass_hat_k_series,
    percentile,
    reason_counts,
)


def _session(name: str, scores: list[float], reason: str = "completed", latencies=()) -> SessionScore:
    turns = [TurnScore(index=i, score=s) for i, s in enumerate(scores)]
    if turns:
        turns[0].exchanges = [
            Exchange(kind="ehr", method="GET", url="Patient/1", status=200, latency_ms=v) for v in latencies
        ] + [Exchange(kind="doctor", text="hi")]
    return SessionScore(session=name, scenario=name, reason=reason, turns=turns)


def _report(*sessions: SessionScore, reasons=None) -> RunReport:
    return RunReport(
        run="r", scorer_version="v1", metrics=Metrics(), sessions=list(sessions), reasons=reasons or {}
    )


def test_curve_counts_sessions_whose_every_turn_reaches_tau_and_leaves_excluded_out():
    report = _report(
        _session("a", [1.0, 0.5]),
        _session("b", [0.7, 0.8]),
        _session("c", [2 / 3, 1.0], reason="max_steps"),  # the assistant's: counted
        _session("d", [1.0, 1.0], reason="infrastructure_error"),  # not the assistant's: never counted
        _session("e", [1.0], reason="patient_error"),
    )
    curve = dict((round(t, 2), v) for t, v in pass_at_session_curve(report))
    assert len(curve) == 101
    assert curve[0.0] == 1.0
    assert curve[0.5] == 1.0
    assert curve[0.6] == pytest.approx(2 / 3)  # b and c (2/3 ≥ 0.6)
    assert curve[0.67] == pytest.approx(1 / 3)  # 0.666… < 0.67: only b
    assert curve[0.7] == pytest.approx(1 / 3)  # exactly τ passes
    assert curve[0.71] == 0.0
    assert curve[1.0] == 0.0


def test_exact_thresholds_pass_despite_float_rounding():
    report = _report(_session("a", [2 / 3]))
    curve = pass_at_session_curve(report, steps=4)  # τ = 0, 1/3, 2/3, 1
    assert [v for _, v in curve] == [1.0, 1.0, 1.0, 0.0]


def test_session_without_turns_never_passes_and_no_scored_session_gives_no_curve():
    assert [v for _, v in pass_at_session_curve(_report(_session("a", []), _session("b", [1.0])))][0] == 0.5
    assert pass_at_session_curve(_report(_session("x", [1.0], reason="infrastructure_error"))) == []
    assert pass_at_session_curve(_report()) == []


def test_curve_at_the_published_thresholds_agrees_with_the_sample_metrics(baseline):
    curve = dict((round(t, 2), v) for t, v in pass_at_session_curve(baseline))
    assert curve[0.6] == pytest.approx(baseline.metrics.pass_at_session["0.6"])
    assert curve[0.75] == pytest.approx(baseline.metrics.pass_at_session["0.75"])


def test_reason_counts_put_excluded_reasons_apart():
    report = _report(
        _session("a", [1]),
        _session("b", [1], "timeout"),
        _session("c", [1], "timeout"),
        _session("d", [], "infrastructure_error"),
    )
    scored, excluded = reason_counts(report)
    assert list(scored.items()) == [("timeout", 2), ("completed", 1)]
    assert excluded == {"infrastructure_error": 1}
    # the scorer's own counts win over counting the listed sessions
    scored, excluded = reason_counts(_report(reasons={"completed": 7, "patient_error": 2}))
    assert scored == {"completed": 7} and excluded == {"patient_error": 2}


def test_latencies_are_the_scored_sessions_ehr_calls_only():
    report = _report(
        _session("a", [1], latencies=[5.0, 7.5]), _session("b", [1], "infrastructure_error", [99.0])
    )
    assert ehr_latencies(report) == [5.0, 7.5]


def test_histogram_bins_and_shared_ranges():
    h = histogram([0, 1, 2, 3, 4, 10], bins=5)
    assert h.edges == [0, 2, 4, 6, 8, 10] and h.counts == [2, 2, 1, 0, 1]  # the last bin is closed
    shared = histogram([5.0], bins=2, lo=0.0, hi=10.0)
    assert shared.counts == [0, 1]
    clipped = histogram([-1.0, 20.0], bins=2, lo=0.0, hi=10.0)
    assert clipped.counts == [1, 1]
    assert histogram([3.0, 3.0], bins=4).counts == [2]
    assert histogram([]).counts == []


def test_percentile_is_nearest_rank():
    values = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    assert percentile(values, 50) == 50 and percentile(values, 99) == 100 and percentile(values, 0) == 10
    assert percentile([], 50) is None


def test_pass_hat_k_is_ordered_numerically_and_ignores_odd_keys():
    m = Metrics(pass_hat_k={"10": 0.1, "2": 0.5, "1": 0.8, "all": 0.0})
    assert pass_hat_k_series(m) == [(1, 0.8), (2, 0.5), (10, 0.1)]
