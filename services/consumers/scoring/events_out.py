"""The scorer's output events (`rounds.score.turn` / `.session` on rounds.scores), built deterministically:
ids derived from (scorer version, run, session, turn) and times from the session's end, so scoring the same
log with the same version twice publishes the same events (consumers drop the repeat as a duplicate)."""

from __future__ import annotations

import uuid

from contracts.score import SessionScore, TurnScore
from contracts.trajectory import Trajectory
from events.catalog import CATALOG
from events.envelope import CloudEvent
from events.payloads import JudgeCall, ScoreSession, ScoreTurn
from events.payloads.outcome import ScoreCheck

SOURCE = "/rounds/scoring"
_NAMESPACE = uuid.UUID("6f1c3a52-1d7e-5a51-9d1e-2a3c0b5e7f10")


def event_id(version: str, run: str, session: str, turn: int | None) -> str:
    return uuid.uuid5(_NAMESPACE, f"{version}|{run}|{session}|{'session' if turn is None else turn}").hex


def _identity(score: SessionScore, version: str) -> dict:
    return {"run_id": score.run, "scorer_version": version, "scenario": score.scenario, "trial": score.trial,
            "language": score.language, "variant": score.variant}


def turn_event(score: SessionScore, turn: TurnScore, log: Trajectory, version: str,
               scorer: str) -> CloudEvent:
    turn_log = log.turns.get(turn.index)
    answers = turn_log.answers if turn_log else []
    if answers:
        message = answers[-1].message_id
    elif turn_log is not None and turn_log.doctor is not None:
        message = turn_log.doctor.message_id
    else:
        message = f"{log.session_id[:40]}-t{turn.index}"
    payload = ScoreTurn(
        scorer=scorer, metric="rubric", value=turn.score, message_id=message, turn=turn.index,
        score=turn.score, task_type=turn.task_type,
        checks=[ScoreCheck(id=c.id, kind=c.kind, passed=c.passed, weight=c.weight, safety=c.safety,
                           evidence=(c.evidence or "")[:500] or None) for c in turn.checks],
        **_identity(score, version),
    )
    return CATALOG.make(payload, source=SOURCE, subject=log.session_id,
                        id=event_id(version, score.run, log.session_id, turn.index), time=log.ended_time)


def session_event(score: SessionScore, log: Trajectory, version: str, scorer: str,
                  threshold: float = 0.75) -> CloudEvent:
    excluded = score.excluded
    passed = None if score.score is None else all(t.score >= threshold for t in score.turns)
    payload = ScoreSession(
        scorer=scorer, metrics={} if score.score is None else {"score": score.score},
        passed=passed, score=score.score, reason=score.reason, excluded=excluded, turns=len(score.turns),
        rationale=score.error, **_identity(score, version),
    )
    return CATALOG.make(payload, source=SOURCE, subject=log.session_id,
                        id=event_id(version, score.run, log.session_id, None), time=log.ended_time)


def judge_events(score: SessionScore, log: Trajectory, version: str) -> list[CloudEvent]:
    """One `rounds.score.judge` per call of the optional judge the score holds: its `llm_judge` items and the
    items it judged beside a deterministic check (`judge_agreement`); ids derived like the scores'."""
    out = []
    for turn in score.turns:
        calls = [(c.id, c.passed, (c.measures or {}).get("judge_call")) for c in turn.checks
                 if c.kind == "llm_judge"]
        calls += [(p["id"], bool(p["judge"]), p.get("judge_call")) for p in turn.judge_agreement]
        for item, passed, call in calls:
            if not call:
                continue
            payload = JudgeCall(model=call["model"], prompt_version=call["prompt_version"], turn=turn.index,
                                item=item, passed=passed, reason=(call.get("reason") or "")[:500] or None,
                                latency_ms=call.get("latency_ms"), **_identity(score, version))
            turn_id = event_id(version, score.run, log.session_id, turn.index)
            key = uuid.uuid5(_NAMESPACE, f"{turn_id}|judge|{item}")
            out.append(CATALOG.make(payload, source=SOURCE, subject=log.session_id, id=key.hex,
                                    time=log.ended_time))
    return out
