"""The terminal summary shows the run's numbers, the termination reasons with excluded sessions apart, the
difficulty and language breakdowns, and two runs side by side with deltas."""

from __future__ import annotations

from rich.console import Console

from contracts.score import Metrics, RunReport
from services.consumers.report.compare import compare_runs
from services.consumers.report.terminal import print_summary


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
    assert _row(text, "Avg") == ["Avg", f"{m.avg:.3f}"]
    assert _row(text, "Pass@Turn τ=0.6") == ["Pass@Turn τ=0.6", f"{m.pass_at_turn['0.6']:.3f}"]
    assert _row(text, "Pass@Session τ=0.75")[1] == f"{m.pass_at_session['0.75']:.3f}"
    assert _row(text, "pass^2")[1] == f"{m.pass_hat_k['2']:.3f}"
    assert _row(text, "sessions excluded")[1] == "1"
    reasons = _section(text, "sessions by termination reason", "sessions excluded from scores")
    assert _row(reasons, "completed")[1] == str(baseline.reasons["completed"])
    assert _row(reasons, "timeout")[1] == str(baseline.reasons["timeout"])
    assert "infrastructure_error" not in reasons
    excluded = _section(text, "sessions excluded from scores", "by difficulty")
    assert _row(excluded, "infrastructure_error")[1] == "1"
    l3 = baseline.by["difficulty"]["L3"]
    assert _row(text, "L3") == [
        "L3",
        str(l3.sessions),
        f"{l3.avg:.3f}",
        f"{l3.pass_at_turn['0.6']:.3f}",
        f"{l3.pass_at_turn['0.75']:.3f}",
        f"{l3.pass_at_session['0.6']:.3f}",
        f"{l3.pass_at_session['0.75']:.3f}",
    ]
    assert _row(text, "zh")[2] == f"{baseline.by['language']['zh'].avg:.3f}"


def test_two_runs_side_by_side_with_deltas(baseline, replay):
    text = _text(baseline, replay, compare_runs(baseline, replay))
    avg = _row(text, "Avg")
    assert avg == ["Avg", f"{baseline.metrics.avg:.3f}", "1.000", f"{1 - baseline.metrics.avg:+.3f}"]
    assert _row(text, "turns scored")[1:] == ["64", "64", "+0"]
    en_before = baseline.by["language"]["en"].avg
    assert _row(text, "en")[2] == f"{en_before:.3f} → 1.000 ({1 - en_before:+.3f})"
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
