"""The HTML report's turn-by-turn comparison of two runs of the same scenarios (e.g. a counterfactual replay
and its original): for each paired session and turn, both scores, the delta, whether the turn improved, and
the checks whose verdict changed.
"""

from __future__ import annotations

from html import escape

from services.consumers.report.comparison_model import CheckChange, Comparison, SessionPair, TurnDelta
from services.consumers.report.html_charts import turn_changes_chart
from services.consumers.report.stats import is_excluded
from services.consumers.report.summary import fmt, fmt_delta

STATUS_LABELS = {
    "improved": "improved",
    "regressed": "regressed",
    "unchanged": "unchanged",
    "only_before": "only in {before}",
    "only_after": "only in {after}",
    "excluded": "excluded (infrastructure/patient error)",
}


def _verdict(v: bool | None) -> str:
    return "–" if v is None else ("PASS" if v else "FAIL")


def _changes(changes: list[CheckChange]) -> str:
    return "<br>".join(
        f'<span class="check-change" data-check="{escape(c.id)}">{escape(c.id)} ({escape(c.kind)}): '
        f'<span class="{"pass" if c.before else "fail"}">{_verdict(c.before)}</span> → '
        f'<span class="{"pass" if c.after else "fail"}">{_verdict(c.after)}</span></span>'
        for c in changes
    )


def _delta_class(t: TurnDelta) -> str:
    if t.delta is None or t.status == "unchanged":
        return ""
    return "delta-up" if t.delta > 0 else "delta-down"


def pick_pairs(pairs: list[SessionPair], limit: int | None) -> list[SessionPair]:
    """At most `limit` pairs in their order, those with a turn that changed (or in one run only) first."""
    if limit is None or len(pairs) <= limit:
        return pairs

    def changed(p: SessionPair) -> bool:
        return any(t.status not in ("unchanged", "excluded") for t in p.turns)

    first = [p for p in pairs if changed(p)][: max(0, limit)]
    rest = [p for p in pairs if not changed(p)][: max(0, limit - len(first))]
    chosen = {id(p) for p in first + rest}
    return [p for p in pairs if id(p) in chosen]


def compare_section(comparison: Comparison, limit: int | None = None) -> str:
    """The comparison table; with `limit`, at most that many session pairs (pick_pairs), and a note."""
    before, after = escape(comparison.before_run), escape(comparison.after_run)
    counts = comparison.turn_counts
    header = (
        f'<p class="turn-counts">Δ = {after} − {before}. Turns: '
        f'<span class="pass" data-count="improved">{counts["improved"]} improved</span>, '
        f'<span class="fail" data-count="regressed">{counts["regressed"]} regressed</span>, '
        f'<span data-count="unchanged">{counts["unchanged"]} unchanged</span>, '
        f"{counts['only_before'] + counts['only_after']} in one run only, {counts['excluded']} excluded.</p>"
    )
    pairs = pick_pairs(comparison.pairs, limit)
    if len(pairs) < len(comparison.pairs):
        header += (
            f'<p class="meta capped" data-shown="{len(pairs)}" data-total="{len(comparison.pairs)}">'
            f"{len(pairs):,} of {len(comparison.pairs):,} sessions listed, those with a changed turn first "
            "(rounds report --html-sessions N to change); the counts above are over all of them.</p>"
        )
    rows = []
    for pair in pairs:
        span = max(1, len(pair.turns))
        label = f'<td class="session-label" rowspan="{span}">{escape(pair.label)}</td>'
        if not pair.turns:
            ended = sorted({s.reason for s in (pair.before, pair.after) if s is not None and is_excluded(s)})
            note = f"excluded: {', '.join(ended)}" if ended else "no turns"
            rows.append(f'<tr class="excluded">{label}<td colspan="6" class="meta">{escape(note)}</td></tr>')
            continue
        for i, t in enumerate(pair.turns):
            status = STATUS_LABELS[t.status].format(before=comparison.before_run, after=comparison.after_run)
            rows.append(
                f'<tr class="turn-delta {t.status}" data-session="{escape(pair.label)}" '
                f'data-turn="{t.index}" '
                f'data-status="{t.status}">{label if i == 0 else ""}<td class="num">{t.index}</td>'
                f'<td class="num">{fmt(t.before)}</td><td class="num">{fmt(t.after)}</td>'
                f'<td class="num {_delta_class(t)}">{fmt_delta(t.before, t.after)}</td>'
                f"<td>{escape(status)}</td><td>{_changes(t.changed_checks)}</td></tr>"
            )
    table = (
        '<table class="compare"><thead><tr><th>session</th><th>turn</th>'
        f"<th>{before}</th><th>{after}</th><th>Δ</th><th>change</th><th>checks that changed</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    chart = f'<div class="charts">{turn_changes_chart(comparison)}</div>'
    return f'<section id="compare"><h2>Turn by turn: {before} vs {after}</h2>{header}{chart}{table}</section>'
