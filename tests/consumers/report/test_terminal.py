"""The terminal summary shows the run's numbers, the termination reasons with excluded sessions apart, the
difficulty and language breakdowns, and two runs side by side with deltas."""

from __future__ import annotations

from rich.console import Console

from contracts.score import Metrics, RunReport
from services.consumers.report.compare import compare_runs
from services.consumers.report.terminal import print_summary
from tests.consumers.report.sample import shown


def _text(*args) -> str:
    console = Console(record=True, width=250, color_system=None)
    print_summary(console, *args)
    return console.export_text()


def _row(text: str, label: str) -> list[str]:
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("│") if c.strip()]
        if cells and cells[0] == label:
            return cells
    raise AssertionError(f"no row {label!r} in\n{text}")


def _section(text: str, title: str, until: str) -> str:
    return text[text.index(title) : text.index(until, text.index(title))]


def test_one_run(baseline):
    text = _text(baseline)
    m = baseline.metrics
    ci = m.ci95
    assert _row(text, "Avg") == ["Avg", shown(m.avg, ci.avg)]
    turn, session = ci.pass_at_turn["0.6"], ci.pass_at_session["0.75"]
    assert _row(text, "Pass@Turn τ=0.6") == ["Pass@Turn τ=0.6", shown(m.pass_at_turn["0.6"], turn)]
    assert _row(text, "Pass@Session τ=0.75")[1] == shown(m.pass_at_session["0.75"], session)
    assert _row(text, "pass^2")[1] == shown(m.pass_hat_k["2"], ci.pass_hat_k["2"])
    assert "[lo, hi]: 95 % interval clustered by scenario" in text
    assert _row(text, "sessions excluded")[1] == "1"
    reasons = _section(text, "sessions by termination reason", "sessions excluded from scores")
    assert _row(reasons, "completed")[1] == str(baseline.reasons["completed"])
    assert _row(reasons, "timeout")[1] == str(baseline.reasons["timeout"])
    assert "infrastructure_error" not in reasons
    excluded = _section(text, "sessions excluded from scores", "by difficulty")
    assert _row(excluded, "infrastructure_error")[1] == "1"
    l3 = baseline.by["difficulty"]["L3"]
    c3 = l3.ci95
    assert _row(text, "L3") == [
        "L3",
        str(l3.sessions),
        shown(l3.avg, c3.avg),
        shown(l3.pass_at_turn["0.6"], c3.pass_at_turn["0.6"]),
        shown(l3.pass_at_turn["0.75"], c3.pass_at_turn["0.75"]),
        shown(l3.pass_at_session["0.6"], c3.pass_at_session["0.6"]),
        shown(l3.pass_at_session["0.75"], c3.pass_at_session["0.75"]),
    ]
    zh = baseline.by["language"]["zh"]
    assert _row(text, "zh")[2] == shown(zh.avg, zh.ci95.avg)


def test_two_runs_side_by_side_with_deltas(baseline, replay):
    text = _text(baseline, replay, compare_runs(baseline, replay))
    avg = _row(text, "Avg")
    m, r = baseline.metrics, replay.metrics
    assert avg == ["Avg", shown(m.avg, m.ci95.avg), shown(1.0, r.ci95.avg), f"{1 - m.avg:+.3f}"]
    assert _row(text, "turns scored")[1:] == ["64", "64", "+0"]
    en, en_after = baseline.by["language"]["en"], replay.by["language"]["en"]
    assert _row(text, "en")[:4] == ["en", "run-baseline", str(en.sessions), shown(en.avg, en.ci95.avg)]
    by_language = _section(text, "by language", "LLM judge")
    assert _row(by_language, "run-replay")[2] == shown(1.0, en_after.ci95.avg)  # en's second row
    assert _row(by_language, "Δ")[1] == f"{1 - en.avg:+.3f}"
    assert "Δ = run-replay − run-baseline" in text
    improved = compare_runs(baseline, replay).turn_counts["improved"]
    assert f"{improved} improved, 0 regressed" in text


def test_names_are_shown_as_text_not_rich_markup(baseline):
    odd = baseline.model_copy(update={"run": "[red]run[/red]", "reasons": {"[bold]x[/bold]": 1}})
    text = _text(odd)
    assert "[red]run[/red]" in text and "[bold]x[/bold]" in text


def test_the_llm_judge_and_its_agreement(baseline, replay):
    entries = [
        e for s in baseline.sessions for t in s.turns for e in getattr(t, "judge_agreement", None) or []
    ]
    agree = sum(e["judge"] == e["check"] for e in entries)
    text = " ".join(_text(baseline).split())
    assert "LLM judge of run-baseline: model judge-model-1, prompt_version criteria-v3;" in text
    assert f"agreed with the checks on {agree} of {len(entries)}" in text
    # agreement entries without the scorer's description still count; no judge at all: no line
    assert "LLM judge of run-replay: unnamed; agreed" in " ".join(_text(replay).split())
    assert "LLM judge of" not in _text(RunReport(run="r", scorer_version="1", metrics=Metrics()))
