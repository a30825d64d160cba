"""The scored-run document: what `rounds report --json` writes and what the HTML and terminal views render.

The scorer (services/consumers/scoring) builds it from the score projections and the session log; the
report (services/consumers/report) renders it; tests and users read it. It lives below both so the scorer
does not depend on its renderer. Every field either writes is declared here; unknown fields of an older or
newer document are kept (`extra="allow"`) but nothing reads them by name. The published shape:
`{run, scorer_version, metrics: {avg, pass_at_turn: {"0.6", "0.75"}, pass_at_session: {...}, pass_hat_k:
{"1", ...}, ci95: {avg: [lo, hi], pass_at_turn: {...}, ...}, n_clusters, method}, by: {family: {...},
difficulty: {...}, language: {...}, variant: {...}}, sessions: [...]}` (intervals: docs/statistics.md).
Add fields freely; never rename one.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")


TURN_COUNTS = {
    "reached": "the physician's message of the turn was sent (the session had not ended before it)",
    "answered": "the assistant gave the turn its answer",
    "scored": "every turn of a scored session, reached or not (a turn never reached scores 0)",
}
"""The one definition of the turns a run counts, shared by `rounds run`'s progress and summary, the metrics
and the report: reached ≥ answered, and scored counts what the scenarios hold."""


class Intervals(_Model):
    """95 % intervals [lo, hi] of the figures beside them, keyed like them (services/consumers/statistics)."""

    avg: list[float] | None = None
    pass_at_turn: dict[str, list[float]] = Field(default_factory=dict)
    pass_at_session: dict[str, list[float]] = Field(default_factory=dict)
    pass_hat_k: dict[str, list[float]] = Field(default_factory=dict)


class Metrics(_Model):
    """Scores over the sessions not ended by infrastructure or patient errors (those are counted apart)."""

    avg: float | None = None  # mean turn score
    pass_at_turn: dict[str, float] = Field(default_factory=dict)  # τ ("0.6", "0.75") -> share of turns ≥ τ
    pass_at_session: dict[str, float] = Field(default_factory=dict)  # τ -> share of sessions, every turn ≥ τ
    pass_hat_k: dict[str, float] = Field(default_factory=dict)  # k ("1".."trials") -> τ²-bench pass^k
    turns: int = 0  # scored (TURN_COUNTS)
    turns_reached: int = 0
    turns_answered: int = 0
    sessions: int = 0
    excluded_sessions: int = 0  # infrastructure_error / patient_error: not scored
    tools: dict[str, float] = Field(default_factory=dict)  # fhir_calls_per_turn, error_rate, latency_p50_ms …
    ci95: Intervals | None = None  # the figures' 95 % intervals, clustered by scenario (None: not computed)
    n_clusters: int | None = None  # scenarios the intervals are clustered on
    method: str | None = None  # how the intervals were computed (docs/statistics.md)


class Check(_Model):
    id: str
    kind: str
    passed: bool
    weight: float = 1.0
    safety: bool = False
    evidence: str | None = None  # what the check saw (the cited number, the written resource, …)
    precision: dict[str, Any] | None = None  # the precision rule's deductions (scorer v3's precision check)
    # figures a check measured beside its verdict (retrieval recall/precision, the gold's main table)
    measures: dict[str, Any] | None = None


class Exchange(_Model):
    """One step of the conversation as the per-session view shows it."""

    kind: str  # doctor | assistant | patient | question | clarification | ehr | tool | cds
    sender: str | None = None  # doctor | assistant | patient: who wrote it (a clarification goes both ways)
    text: str | None = None
    method: str | None = None
    url: str | None = None  # relative to the session's FHIR base, without the query
    query: dict[str, list[str]] | None = None  # the request's search parameters
    status: int | None = None
    latency_ms: float | None = None


class TurnScore(_Model):
    index: int
    score: float
    task_type: str | None = None
    checks: list[Check] = Field(default_factory=list)
    exchanges: list[Exchange] = Field(default_factory=list)
    reached: bool = True  # False: the session ended before this turn (it scores 0, its tools are not counted)
    tools: dict[str, Any] = Field(default_factory=dict)  # tool figures: fhir_calls, ehr_latency_ms …
    # the optional LLM judge beside the deterministic check, one {id, judge, check} per item both judged
    judge_agreement: list[dict[str, Any]] = Field(default_factory=list)


class SessionScore(_Model):
    session: str  # session id
    scenario: str
    family: str | None = None
    difficulty: str | None = None
    language: str | None = None
    variant: str | None = None
    trial: int = 0
    run: str | None = None  # the run the session belongs to
    persona: str | None = None  # the scenario's persona label (a `by` dimension)
    assistant: str | None = None  # the assistant spec its session.started recorded
    reason: str  # rounds.session.ended reason
    score: float | None = None  # None when excluded
    excluded: str | None = None  # why it is not scored: an end reason not the assistant's, or "unscorable"
    error: str | None = None  # why an unscorable session could not be scored (a bug of Rounds)
    turns: list[TurnScore] = Field(default_factory=list)
    judge: dict[str, Any] | None = None  # the LLM judge that judged it: model, prompt version
    ehr_latency_p50_ms: float | None = None  # median latency of its FHIR calls
    retry_of: str | None = None  # the earlier session this one reruns (`retryOf` on its session.started)
    superseded_by: str | None = None  # a later session of the run reran this one: shown, never counted


class RunReport(_Model):
    run: str
    scorer_version: str
    assistant: str | None = None
    replay_of: str | None = None  # the run this one replays (counterfactual replay)
    metrics: Metrics
    by: dict[str, dict[str, Metrics]] = Field(default_factory=dict)  # dimension -> value -> metrics
    reasons: dict[str, int] = Field(default_factory=dict)  # termination reason -> sessions
    sessions: list[SessionScore] = Field(default_factory=list)
    superseded: int = 0  # sessions a rerun replaced (--retry-failed, interrupted): in `sessions`, not counted
    judge: dict[str, Any] | None = None  # optional LLM judge: model, prompt version, agreement
    model_usage: dict[str, Any] | None = None  # model_usage.ModelUsage from the log, when a model was called
    # a question-answering suite's figures by main table, gold resource type and template, each with its
    # interval (services/consumers/scoring/answer_metrics.py); overall ones are in `metrics`
    answers: dict[str, Any] | None = None


DIMENSIONS = ("family", "task_type", "difficulty", "language", "variant", "persona")
THRESHOLDS = ("0.6", "0.75")
