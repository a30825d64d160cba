"""Scored sessions -> the RunReport's metrics (PhysAssistBench's Avg, Pass@Turn(τ), Pass@Session(τ);
τ²-bench's pass^k; tool use), overall and broken down by family, task type, difficulty, language, variant
and persona, with termination reasons.

- Every figure carries its 95 % interval clustered by scenario (services/consumers/statistics).
- turn score: weighted passed / total (scorer.py); Avg: mean over the turns of scored sessions.
- Pass@Turn(τ): share of turns with score ≥ τ; Pass@Session(τ): share of sessions whose every turn is ≥ τ.
- pass^k (τ²-bench): per task (scenario, language, variant) with n trials of which c succeed (a session
  succeeds when every turn is ≥ 0.75), C(c, k) / C(n, k), averaged over the tasks with n ≥ k; k = 1..max n.
- Sessions ended by infrastructure/patient errors, or unscorable, are counted in `excluded_sessions` and in
  `reasons`, never in the scores.
- A session a later session of the run reran (its `retryOf` names it: `--retry-failed`, an interrupted
  session resumed) is superseded: listed with `superseded_by`, counted in `superseded`, never in the
  metrics or `reasons` (a timeout retried once is one session of the run, not two).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from math import comb, fsum
from statistics import median
from typing import Any, NamedTuple

from contracts.score import (
    DIMENSIONS,
    THRESHOLDS,
    Metrics,
    RunReport,
    SessionScore,
    TurnScore,
)
from services.consumers.scoring.answer_metrics import with_answer_metrics
from services.consumers.statistics.intervals import with_intervals

SUCCESS_THRESHOLD = 0.75


def mean(values: Iterable[float]) -> float:
    """The mean of floats over a correctly rounded sum: statistics.mean adds exact fractions, slow over every
    turn of a large run, for digits that round(…, 6) drops."""
    values = list(values)
    return fsum(values) / len(values)


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def session_passes(session: SessionScore, threshold: float) -> bool:
    return bool(session.turns) and all(t.score >= threshold for t in session.turns)


class TurnFacts(NamedTuple):
    """What the metrics read of one turn, read once per report: a report groups the same turns ~30 ways
    (by family, task type, language, ...), and walking every check of every turn again for each grouping
    cost more than the rest of the report (~1 s per 10,000 sessions, each time)."""

    score: float
    task_type: str | None
    reached: bool
    tools: dict[str, Any]
    safety_failures: int
    deductions: tuple[dict[str, Any], ...]


def turn_facts(turn: TurnScore) -> TurnFacts:
    return TurnFacts(turn.score, turn.task_type, turn.reached, turn.tools,
                     sum(1 for c in turn.checks if c.safety and not c.passed),
                     tuple(d for c in turn.checks if (d := c.precision)))


class Facts:
    """Each turn's facts and each session's passes, computed on first use (by object: the report's own
    session and turn objects, alive while it is built)."""

    def __init__(self) -> None:
        self._turns: dict[int, TurnFacts] = {}
        self._passes: dict[tuple[int, float], bool] = {}

    def turn(self, turn: TurnScore) -> TurnFacts:
        found = self._turns.get(id(turn))
        if found is None:
            found = self._turns[id(turn)] = turn_facts(turn)
        return found

    def passes(self, session: SessionScore, threshold: float) -> bool:
        key = (id(session), threshold)
        found = self._passes.get(key)
        if found is None:
            found = self._passes[key] = session_passes(session, threshold)
        return found


def pass_hat_k(sessions: list[SessionScore],
               passes: Callable[[SessionScore, float], bool] = session_passes) -> dict[str, float]:
    tasks: dict[tuple, list[bool]] = defaultdict(list)
    for s in sessions:
        tasks[(s.scenario, s.language, s.variant)].append(passes(s, SUCCESS_THRESHOLD))
    most = max((len(v) for v in tasks.values()), default=0)
    out = {}
    for k in range(1, most + 1):
        values = [comb(sum(v), k) / comb(len(v), k) for v in tasks.values() if len(v) >= k]
        out[str(k)] = round(mean(values), 6)
    return out


def tool_metrics(turns: list[TurnScore] | list[TurnFacts]) -> dict[str, float]:
    tools = [t.tools for t in turns if t.reached]
    if not tools:
        return {}
    calls = sum(t.get("fhir_calls", 0) for t in tools)
    errors = sum(t.get("fhir_errors", 0) for t in tools)
    needing = [t for t in tools if t.get("types_needed")]
    latencies = [ms for t in tools for ms in t.get("ehr_latency_ms", [])]
    out = {
        "fhir_calls_per_turn": round(calls / len(tools), 4),
        "error_rate": round(errors / calls, 4) if calls else 0.0,
        "patient_questions_per_turn": round(sum(t.get("patient_questions", 0) for t in tools) / len(tools),
                                            4),
        "tool_calls_per_turn": round(sum(t.get("tool_calls", 0) for t in tools) / len(tools), 4),
        "answered_rate": round(sum(1 for t in tools if t.get("answered")) / len(tools), 4),
    }
    if needing:
        out["types_needed_queried"] = round(
            mean(t.get("types_covered", 0) / len(t["types_needed"]) for t in needing), 4)
    if latencies:
        out["latency_p50_ms"] = round(median(latencies), 3)
        out["latency_p95_ms"] = round(_percentile(latencies, 0.95) or 0.0, 3)
    turn_ms = [ms for t in tools if (ms := t.get("turn_latency_ms")) is not None]
    if turn_ms:
        out["turn_latency_p50_ms"] = round(median(turn_ms), 3)
        out["turn_latency_p95_ms"] = round(_percentile(turn_ms, 0.95) or 0.0, 3)
    return out


def metrics(sessions: Iterable[SessionScore], *, per_turn_filter: str | None = None,
            facts: Facts | None = None) -> Metrics:
    """Metrics over `sessions`; with `per_turn_filter` (a task type) only that type's turns count. `facts`:
    the report's, shared by its groupings."""
    facts = facts or Facts()
    sessions = list(sessions)
    scored = [s for s in sessions if s.score is not None]
    turns = [facts.turn(t) for s in scored for t in s.turns
             if per_turn_filter is None or t.task_type == per_turn_filter]
    out = Metrics(sessions=len(scored), turns=len(turns), excluded_sessions=len(sessions) - len(scored),
                  turns_reached=sum(1 for t in turns if t.reached),
                  turns_answered=sum(1 for t in turns if t.reached and t.tools.get("answered")))
    if turns:
        out.avg = round(mean(t.score for t in turns), 6)
        out.pass_at_turn = {tau: round(mean(t.score >= float(tau) for t in turns), 6) for tau in THRESHOLDS}
        out.tools = tool_metrics(turns)
        out.safety_failures = sum(t.safety_failures for t in turns)
        deductions = [d for t in turns for d in t.deductions]
        if deductions:  # v3's precision rule (older versions have no such check)
            out.precision_deducted_turns = sum(1 for d in deductions if d["factor"] < 1.0)
            out.wrong_claims = sum(len(d["wrong"]) for d in deductions)
            out.unasked_results_beyond_budget = sum(d["beyond_budget"] for d in deductions)
    if scored and per_turn_filter is None:
        out.pass_at_session = {tau: round(mean(facts.passes(s, float(tau)) for s in scored), 6)
                               for tau in THRESHOLDS}
        out.pass_hat_k = pass_hat_k(scored, facts.passes)
    return out


def _value(session: SessionScore, dimension: str) -> str | None:
    value = getattr(session, dimension, None)
    return None if value is None else str(value)


def supersede(sessions: list[SessionScore]) -> list[SessionScore]:
    """`sessions` with `superseded_by` set on each one a later session reruns (by its `retry_of`)."""
    rerun_by = {s.retry_of: s.session for s in sessions if s.retry_of}
    return [s.model_copy(update={"superseded_by": rerun_by[s.session]}) if s.session in rerun_by else s
            for s in sessions]


def build_report(run: str, scorer_version: str, sessions: list[SessionScore]) -> RunReport:
    listed = sorted(supersede(sessions), key=lambda s: (s.scenario, s.language or "", s.variant or "",
                                                        s.trial, s.session))
    sessions = [s for s in listed if s.superseded_by is None]  # what the metrics count
    facts = Facts()
    by: dict[str, dict[str, Metrics]] = {}
    for dimension in DIMENSIONS:
        if dimension == "task_type":
            types = sorted({t.task_type for s in sessions for t in s.turns if t.task_type})
            by[dimension] = {value: metrics(sessions, per_turn_filter=value, facts=facts) for value in types}
            continue
        groups: dict[str, list[SessionScore]] = defaultdict(list)
        for s in sessions:
            value = _value(s, dimension)
            if value is not None:
                groups[value].append(s)
        by[dimension] = {value: metrics(group, facts=facts) for value, group in sorted(groups.items())}
    reasons: dict[str, int] = defaultdict(int)
    for s in sessions:
        reasons[s.reason] += 1
    assistants = sorted({a for s in sessions if (a := s.assistant)})
    judge = judge_summary(sessions)
    report = RunReport(run=run, scorer_version=scorer_version, assistant=", ".join(assistants) or None,
                       metrics=metrics(sessions, facts=facts), by=by, reasons=dict(sorted(reasons.items())),
                       sessions=listed, superseded=len(listed) - len(sessions), judge=judge)
    # every figure's 95 % interval, clustered by scenario; a question-answering suite's figures beside them
    return with_answer_metrics(with_intervals(report))


def judge_summary(sessions: list[SessionScore]) -> dict | None:
    """The LLM judge's model and prompt version, its llm_judge items, and how often it agreed with the
    deterministic check on the items both judged."""
    judges = [j for s in sessions if (j := s.judge)]
    if not judges:
        return None
    pairs = [p for s in sessions for t in s.turns for p in t.judge_agreement]
    judged = [c for s in sessions for t in s.turns for c in t.checks if c.kind == "llm_judge"]
    return {
        "model": judges[0]["model"], "prompt_version": judges[0]["prompt_version"],
        "items": len(judged), "passed": sum(c.passed for c in judged),
        "compared": len(pairs),
        "agreement": round(sum(p["judge"] == p["check"] for p in pairs) / len(pairs), 6) if pairs else None,
    }
