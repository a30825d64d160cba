"""The HTML report's per-session view: for every session its turns, each with the conversation (doctor,
assistant, patient, clarifications), every EHR call (method, URL, status, latency) and every check with
pass/fail and the evidence the check saw, and the precision rule's deductions (wrong claims, unasked-for
results beyond the budget).

Everything shown comes from LLMs, patients' simulators or scenario files, so every string goes through
`escape` and nothing is ever placed inside a script or an event-handler attribute.
"""

from __future__ import annotations

from html import escape

from contracts.score import Check, Exchange, RunReport, SessionScore, TurnScore
from services.consumers.report.stats import is_excluded, is_superseded, reason_counts, session_passes
from services.consumers.report.summary import fmt

# who said it, as the view labels each kind of exchange
SPEAKERS = {
    "doctor": "Doctor",
    "assistant": "Assistant",
    "patient": "Patient",
    "question": "Assistant → patient",
    "clarification": "Clarification",
    "tool": "Tool",
    "cds": "CDS Hooks",
}
SENDERS = {"doctor": "Doctor", "assistant": "Assistant", "patient": "Patient"}
FAILING_TAU = 0.75  # "only failing sessions" filter: a session not passing at the stricter τ


def _status_class(status: int | None) -> str:
    return "status-ok" if status is not None and 200 <= status < 400 else "status-err"


def call_url(x: Exchange) -> str:
    """The call as it was made: the path and its search parameters (decoded, so they read as written)."""
    params = "&".join(f"{k}={v}" for k, values in (x.query or {}).items() for v in values)
    url = x.url or ""
    return f"{url}{'&' if '?' in url else '?'}{params}" if params else url


def exchange_html(x: Exchange) -> str:
    kind = escape(x.kind)
    if x.kind == "ehr":
        status = "–" if x.status is None else str(x.status)
        latency = "" if x.latency_ms is None else f" · {x.latency_ms:.1f} ms"
        return (
            f'<li class="x-ehr" data-kind="ehr"><span class="who">EHR</span>'
            f'<span class="method">{escape(x.method or "?")}</span> '
            f'<span class="url">{escape(call_url(x))}</span> → '
            f'<span class="status {_status_class(x.status)}" data-status="{escape(status)}">'
            f"{escape(status)}</span>"
            f'<span class="latency">{escape(latency)}</span></li>'
        )
    who = SPEAKERS.get(x.kind, x.kind)
    if x.kind == "clarification" and x.sender:  # the assistant's question and the doctor's reply share a kind
        who = f"{SENDERS.get(x.sender, x.sender)} (clarification)"
    return (
        f'<li class="x-{kind}" data-kind="{kind}"><span class="who">{escape(who)}</span>'
        f'<span class="text">{escape(x.text or "")}</span></li>'
    )


def _verdict(passed: bool) -> str:
    return '<span class="pass">PASS</span>' if passed else '<span class="fail">FAIL</span>'


def judge_verdicts(t: TurnScore) -> dict[str, bool]:
    """The optional LLM judge's verdict per check id (the scorer's `judge_agreement` extra on a turn)."""
    entries = t.judge_agreement
    return {
        str(e["id"]): bool(e["judge"]) for e in entries if isinstance(e, dict) and {"id", "judge"} <= e.keys()
    }


def check_row(c: Check, judged: dict[str, bool] | None = None) -> str:
    flags = " ⚠ safety" if c.safety else ""
    judge = ""
    if judged is not None:
        verdict = judged.get(c.id)
        agree = "" if verdict is None else (" (agrees)" if verdict == c.passed else " (disagrees)")
        judge = f'<td class="judge">{"–" if verdict is None else _verdict(verdict)}{agree}</td>'
    return (
        f'<tr class="check" data-check="{escape(c.id)}" data-passed="{str(c.passed).lower()}">'
        f"<td>{escape(c.id)}</td><td>{escape(c.kind)}{flags}</td><td>{_verdict(c.passed)}</td>"
        f'<td class="num">{c.weight:g}</td><td class="evidence">{escape(c.evidence or "")}</td>{judge}</tr>'
    )


def _claims_html(claims: list, kind: str) -> str:
    return "".join(
        f'<li class="claim {kind}" data-subject="{escape(str(c.get("subject") or ""))}">'
        f'{escape(" ".join(str(c[k]) for k in ("text", "unit") if c.get(k)))}'
        f'{" · " + escape(str(c.get("name") or c["subject"])) if c.get("subject") else ""}</li>'
        for c in claims if isinstance(c, dict)
    )


def precision_html(t: TurnScore) -> str:
    """The precision rule on this turn (v3's `precision` check): the wrong claims and the unasked-for results
    it counted, the budget, the rates and the factor the turn's score was multiplied by; "" without one."""
    rule = next((d for c in t.checks if isinstance(d := c.precision, dict)), None)
    if rule is None:
        return ""
    wrong, extra = rule.get("wrong") or [], rule.get("extra") or []
    beyond, factor = int(rule.get("beyond_budget") or 0), float(rule.get("factor", 1.0))
    deducted = factor < 1.0
    head = (f"Precision · factor {factor:.2f} · {len(wrong)} wrong claim{'s' * (len(wrong) != 1)} "
            f"× {rule.get('per_wrong')} · {len(extra)} unasked-for result{'s' * (len(extra) != 1)}, "
            f"budget {rule.get('budget')}, {beyond} beyond it × {rule.get('per_extra')}")
    parts = [f'<div class="precision" data-factor="{factor:.6f}" data-wrong="{len(wrong)}" '
             f'data-extra="{len(extra)}" data-beyond="{beyond}" data-deducted="{str(deducted).lower()}">',
             f'<h4 class="{"fail" if deducted else "pass"}">{escape(head)}</h4>']
    if wrong:
        parts.append('<p>wrong claims:</p><ul class="claims wrong">' + _claims_html(wrong, "wrong") + "</ul>")
    if extra:
        parts.append('<p>unasked-for results:</p><ul class="claims extra">' + _claims_html(extra, "extra")
                     + "</ul>")
    parts.append("</div>")
    return "".join(parts)


def turn_html(t: TurnScore) -> str:
    task = f" · {escape(t.task_type)}" if t.task_type else ""
    passed = sum(c.passed for c in t.checks)
    reached = t.reached  # the scorer marks turns the session never got to
    state = f"({passed}/{len(t.checks)} checks)" if reached else "(not reached: the session ended before it)"
    parts = [
        f'<div class="turn" data-turn="{t.index}" data-score="{t.score:.6f}" '
        f'data-reached="{str(reached).lower()}">',
        f"<h3>Turn {t.index}{task} · score {fmt(t.score)} {state}</h3>",
    ]
    if t.exchanges:
        parts.append('<ul class="conversation">' + "".join(exchange_html(x) for x in t.exchanges) + "</ul>")
    if t.checks:
        judged = judge_verdicts(t) or None
        judge_head = "<th>LLM judge</th>" if judged is not None else ""
        parts.append(
            '<table class="checks"><thead><tr><th>check</th><th>kind</th><th>result</th><th>weight</th>'
            f"<th>evidence</th>{judge_head}</tr></thead><tbody>"
        )
        parts.extend(check_row(c, judged) for c in t.checks)
        parts.append("</tbody></table>")
        parts.append(precision_html(t))
    parts.append("</div>")
    return "".join(parts)


def session_html(s: SessionScore, open_: bool = False) -> str:
    superseded = is_superseded(s)
    excluded = is_excluded(s) or superseded
    facets = [s.family, s.difficulty, s.language, s.variant]
    search = " ".join(x for x in [s.session, s.scenario, s.reason, *facets] if x).lower()
    score = "superseded" if superseded else "excluded" if excluded else fmt(s.score)
    reason_class = "excluded" if excluded else ("completed" if s.reason == "completed" else "")
    rerun = (f' · <span class="badge superseded" data-superseded-by="{escape(s.superseded_by or "")}">'
             f"superseded by its rerun {escape(s.superseded_by or '')}</span>" if superseded else "")
    summary = (
        f"<strong>{escape(s.scenario)}</strong> · trial {s.trial} · "
        f"{escape(' · '.join(x for x in facets if x))} · "
        f'<span class="badge {reason_class}">{escape(s.reason)}</span>{rerun} · '
        f'score <span class="score">{score}</span>'
        f' <span class="meta">({escape(s.session)})</span>'
    )
    body = "".join(turn_html(t) for t in s.turns) or '<div class="turn meta">no turns scored</div>'
    failing = not excluded and not session_passes(s, FAILING_TAU)
    return (
        f'<details class="session" data-session="{escape(s.session)}" data-scenario="{escape(s.scenario)}" '
        f'data-reason="{escape(s.reason)}" data-excluded="{str(excluded).lower()}" '
        f'data-failing="{str(failing).lower()}" data-search="{escape(search)}"{" open" if open_ else ""}>'
        f"<summary>{summary}</summary>{body}</details>"
    )


def pick_sessions(sessions: list[SessionScore], limit: int | None) -> list[SessionScore]:
    """At most `limit` sessions in their order, those worth a look first: excluded ones and those failing at
    FAILING_TAU, then the rest. A large run's page stays small enough for a browser; the JSON has them all."""
    if limit is None or len(sessions) <= limit:
        return sessions

    def notable(s: SessionScore) -> bool:
        return is_excluded(s) or not session_passes(s, FAILING_TAU)

    first = [s for s in sessions if notable(s)][: max(0, limit)]
    rest = [s for s in sessions if not notable(s)][: max(0, limit - len(first))]
    chosen = {id(s) for s in first + rest}
    return [s for s in sessions if id(s) in chosen]


def sessions_section(report: RunReport, limit: int | None = None) -> str:
    """One run's sessions with their own filter controls (a compared run gets a second section); with `limit`,
    at most that many (pick_sessions) and a note saying so."""
    scored, excluded = reason_counts(report)
    options = "".join(f'<option value="{escape(r)}">{escape(r)}</option>' for r in [*scored, *excluded])
    shown = pick_sessions(report.sessions, limit)
    n = len(shown)
    note = (
        f'<p class="meta capped" data-shown="{n}" data-total="{len(report.sessions)}">{n:,} of '
        f"{len(report.sessions):,} sessions listed: those excluded or failing at τ={FAILING_TAU} first "
        "(rounds report --html-sessions N to change); the JSON document holds every session.</p>"
        if n < len(report.sessions)
        else ""
    )
    controls = (
        '<div class="controls">'
        '<input class="session-filter" type="search" '
        'placeholder="filter: scenario, family, language, reason…" '
        f'size="40"><select class="reason-filter"><option value="">every reason</option>{options}</select>'
        '<label><input class="failing-filter" type="checkbox"> '
        f"only sessions failing at τ={FAILING_TAU}</label>"
        '<button class="expand-all" type="button">expand all</button>'
        '<button class="collapse-all" type="button">collapse all</button>'
        f'<span><span class="session-count">{n}</span> of {n} shown</span></div>'
    )
    items = "".join(session_html(s, open_=i == 0) for i, s in enumerate(shown))  # one shown open
    return (
        f'<section class="sessions" data-run="{escape(report.run)}"><h2>Sessions of {escape(report.run)}</h2>'
        f'{note}{controls}<div class="session-list">{items}</div></section>'
    )
