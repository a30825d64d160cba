"""The HTML report's statistics: the paired comparison of two runs (the verdict in words, the differences
with their intervals and p-values, McNemar's test, every session that could not be paired) and the planning
figures (what the trials bought, the scenarios a difference needs)."""

from __future__ import annotations

from html import escape

from contracts.score import RunReport
from services.consumers.statistics.paired import Difference, Paired
from services.consumers.statistics.power import Plan, trials_effect


def _difference_row(name: str, d: Difference | None) -> str:
    if d is None:
        return ""
    return (f'<tr data-figure="{escape(name)}" data-delta="{d.value:.6f}" data-lo="{d.lo:.6f}" '
            f'data-hi="{d.hi:.6f}" data-p="{d.p_value:.6g}"><th>{escape(name)}</th>'
            f'<td class="num">{d.value:+.3f}</td><td class="num">[{d.lo:+.3f}, {d.hi:+.3f}]</td>'
            f'<td class="num">{d.p_value:.3g}</td><td>sign-flip permutation over {d.n_clusters} scenarios'
            "</td></tr>")


def paired_section(paired: Paired) -> str:
    before, after = escape(paired.before_run), escape(paired.after_run)
    m = paired.mcnemar
    rows = (_difference_row("Avg (matched turns)", paired.avg)
            + _difference_row("Pass@Session τ=0.75", paired.pass_at_session)
            + f'<tr class="mcnemar" data-a-only="{m.a_only}" data-b-only="{m.b_only}" '
            f'data-p="{m.p_value:.6g}">'
            f'<th>Pass@Session τ=0.75</th><td class="num">{m.b_only - m.a_only:+d} sessions</td><td></td>'
            f'<td class="num">{m.p_value:.3g}</td><td>McNemar exact: {m.b_only} pass only in {after}, '
            f"{m.a_only} only in {before}</td></tr>")
    unmatched = "".join(f'<li class="unmatched">{escape(name)}: {escape(why)}</li>'
                        for name, why in paired.unmatched)
    listed = (f'<p class="meta">{len(paired.unmatched)} sessions not paired:</p><ul>{unmatched}</ul>'
              if paired.unmatched else '<p class="meta">every session paired.</p>')
    return (f'<section id="paired"><h2>Paired comparison: {after} − {before}</h2>'
            f'<p class="verdict">{escape(paired.verdict())}</p>'
            f'<table class="paired"><caption>{paired.matched} sessions matched on scenario, language, '
            "variant and trial; intervals clustered by scenario</caption><thead><tr><th>figure</th><th>Δ</th>"
            f"<th>95 % interval</th><th>p</th><th>test</th></tr></thead><tbody>{rows}</tbody></table>"
            f"{listed}</section>")


def planning_section(reports: list[RunReport], plan: Plan | None) -> str:
    lines = [f"trials of {r.run}: {effect.line()}" for r in reports if (effect := trials_effect(r))]
    if plan is not None:
        lines += plan.lines()
    if not lines:
        return ""
    items = "".join(f"<li>{escape(line.strip())}</li>" for line in lines)
    return (f'<section id="planning"><h2>Trials and sample size</h2><ul class="planning">{items}</ul>'
            "</section>")
