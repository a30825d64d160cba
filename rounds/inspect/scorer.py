"""The Inspect scorer that is Rounds' scorer, and Rounds' metrics as Inspect metrics.

A sample's score is its session's score from Rounds' scorer at the current version (scoring.py): the value is
the session score (the mean of its turn scores), `metadata["rounds"]` the scorer's whole document for the
session (turn scores, every check with its evidence, exchanges, tool metrics), `metadata["passed"]` whether
it passes Pass@Session at τ = 0.75. Run again by `inspect score LOG` it re-scores the session from the Rounds
log with whatever scorer version is current.

The metrics rebuild the run's report from those documents with Rounds' own `build_report`, so Avg,
Pass@Turn and Pass@Session (τ 0.75) are the numbers `rounds report` prints for the same sessions; each has a
`…_stderr` beside it, its standard error clustered by scenario (services/consumers/statistics), so `inspect
view` shows how far to trust it. Inspect's own `stderr(cluster=…)` is not used: it treats each sample's mean
as one value, while Rounds' figures weigh turns and sessions.
"""

from __future__ import annotations

import math

import anyio
from inspect_ai.scorer import (
    Metric,
    SampleScore,
    Score,
    ScoreReducer,
    Target,
    mean_score,
    metric,
    score_reducer,
    scorer,
)
from inspect_ai.solver import TaskState

from contracts.score import RunReport, SessionScore
from rounds.inspect.scoring import score_logged_session, version
from rounds.settings import settings_for
from services.consumers.scoring.metrics import SUCCESS_THRESHOLD, build_report, session_passes
from services.consumers.statistics.intervals import standard_errors

TAU = str(SUCCESS_THRESHOLD)


class UnscoredSession(RuntimeError):
    """The session has no score (excluded or unscorable): a Rounds failure, never a score of 0."""


@score_reducer(name="rounds_trials")
def rounds_trials() -> ScoreReducer:
    """Inspect's epochs of a sample are Rounds' trials: the mean as the value (Inspect's default), every
    trial's session document kept (`metadata["trials"]`) so the metrics count each session, as Rounds does."""
    mean = mean_score()

    def reduce(scores: list[Score]) -> Score:
        reduced = mean(scores)
        trials = [doc for s in scores for doc in _documents(s)]
        return reduced.model_copy(update={"metadata": {**(reduced.metadata or {}), "trials": trials}})

    return reduce


def _documents(score: Score) -> list[dict]:
    meta = score.metadata or {}
    if meta.get("trials"):
        return list(meta["trials"])
    return [meta["rounds"]] if meta.get("rounds") else []


def report_of(scores: list[SampleScore]) -> RunReport:
    """The Rounds report of the scored samples (every trial's session document)."""
    sessions = [SessionScore.model_validate(doc) for s in scores for doc in _documents(s.score)]
    run = sessions[0].run if sessions else "-"
    return build_report(run or "-", version(), sessions)


@metric(name="avg")
def avg() -> Metric:
    """Rounds' Avg: the mean turn score over the scored sessions."""

    def compute(scores: list[SampleScore]) -> float:
        return report_of(scores).metrics.avg or 0.0

    return compute


@metric(name="pass_at_turn")
def pass_at_turn() -> Metric:
    """Share of turns scoring at least τ = 0.75."""

    def compute(scores: list[SampleScore]) -> float:
        return report_of(scores).metrics.pass_at_turn.get(TAU, 0.0)

    return compute


@metric(name="pass_at_session")
def pass_at_session() -> Metric:
    """Share of sessions whose every turn scores at least τ = 0.75."""

    def compute(scores: list[SampleScore]) -> float:
        return report_of(scores).metrics.pass_at_session.get(TAU, 0.0)

    return compute


def _stderr(figure: str) -> Metric:
    def compute(scores: list[SampleScore]) -> float:
        return standard_errors(report_of(scores), TAU).get(figure, math.nan)

    return compute


@metric(name="avg_stderr")
def avg_stderr() -> Metric:
    """Avg's standard error, clustered by scenario (CR1): languages, variants and trials share a scenario."""
    return _stderr("avg")


@metric(name="pass_at_turn_stderr")
def pass_at_turn_stderr() -> Metric:
    """Pass@Turn's (τ = 0.75) standard error, clustered by scenario."""
    return _stderr("pass_at_turn")


@metric(name="pass_at_session_stderr")
def pass_at_session_stderr() -> Metric:
    """Pass@Session's (τ = 0.75) standard error, clustered by scenario."""
    return _stderr("pass_at_session")


@scorer(metrics=[avg(), avg_stderr(), pass_at_turn(), pass_at_turn_stderr(), pass_at_session(),
                 pass_at_session_stderr()], name="rounds_scorer")
def rounds_scorer(database_url: str | None = None, fhir_base: str | None = None):
    """Rounds' scorer on the sample's session (ROUNDS_DATABASE_URL / ROUNDS_FHIR_BASE unless given)."""

    async def score(state: TaskState, target: Target) -> Score:
        found = state.metadata.get("rounds") or {}
        session_id = found.get("session")
        if not session_id:
            raise UnscoredSession("the sample ran no Rounds session (no metadata['rounds']['session'])")
        settings = settings_for(database_url, fhir_base=fhir_base)
        session = await anyio.to_thread.run_sync(score_logged_session, settings, session_id)
        if session.score is None:
            raise UnscoredSession(f"session {session_id} is not scored: {session.excluded} "
                                  f"{session.error or ''}")
        answers = [e.text for t in session.turns for e in t.exchanges if e.kind == "assistant" and e.text]
        return Score(
            value=session.score,
            answer=answers[-1] if answers else None,
            explanation=_explain(session),
            metadata={"rounds": session.model_dump(mode="json"), "session": session_id, "run": session.run,
                      "scorer_version": version(), "passed": session_passes(session, SUCCESS_THRESHOLD)},
        )

    return score


def _explain(session: SessionScore) -> str:
    turns = "; ".join(f"turn {t.index}: {t.score:.2f} ({sum(c.passed for c in t.checks)}/{len(t.checks)} "
                      "checks)" for t in session.turns)
    return f"{session.reason}; session {session.score:.3f}; {turns}"
