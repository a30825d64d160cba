"""Scoring one ended session: its log + its scenario + the sandbox's final state -> a SessionScore (the
report model), every turn scored by the rules of the version asked for (versions.py: the only dispatcher).
Pure: same inputs, same scores.

Sessions ended by infrastructure or patient errors are excluded (score None), never scored 0; a session the
rules cannot score (a bug of Rounds, never of the assistant) is kept, unscored, with the reason.
"""

from __future__ import annotations

from statistics import median

from contracts.end_reasons import NOT_ASSISTANT_FAULT
from contracts.scenario import RubricItem, Scenario
from contracts.score import SessionScore
from contracts.trajectory import Trajectory
from services.consumers.scoring.check_inputs import CheckContext, FinalState
from services.consumers.scoring.turn_parts import Judge
from services.consumers.scoring.versions import CURRENT, score_turns_of

SCORER = "rounds.scoring"
SCORER_VERSION = CURRENT  # versions.py: bumped there when a check or a data file changes what passes


def persona_label(scenario: Scenario) -> str:
    p = scenario.persona
    return f"{p.health_literacy}-literacy/{p.completeness}"


def judge_requests(log: Trajectory, scenario: Scenario | None) -> list[tuple[RubricItem, CheckContext]]:
    """What `score_session` with a judge asks it, so a caller can judge ahead (outside a transaction): every
    llm_judge item and every item with a description (the agreement figure) of each reached turn. A judge
    sees the conversation, not the sandbox: the contexts hold an empty final state."""
    if log.reason in NOT_ASSISTANT_FAULT or scenario is None:
        return []
    language = log.language
    requests = []
    for index, turn in enumerate(scenario.turns):
        turn_log = log.turns.get(index)
        if turn_log is None or turn_log.doctor is None:
            continue
        ctx = CheckContext(scenario, turn, turn_log, log, FinalState(), language)
        requests += [(item, ctx) for item in turn.rubric
                     if item.kind == "llm_judge" or item.description is not None]
    return requests


def score_session(log: Trajectory, scenario: Scenario | None, state: FinalState | None,
                  judge: Judge | None = None, version: str | None = None) -> SessionScore:
    """One session under the rules of `version` (default: the current SCORER_VERSION). A session the rules
    cannot score (a bug of Rounds, never of the assistant) is returned unscored with the reason."""
    started = log.started
    language = log.language
    base = {
        "session": log.session_id,
        "scenario": (scenario.id if scenario else started.scenario if started else None) or "-",
        "family": scenario.family if scenario else None,
        "difficulty": scenario.difficulty if scenario else None,
        "language": language,
        "variant": log.variant,
        "trial": (started.trial if started else None) or 0,
        "reason": log.reason,
        "run": log.run_id,
        "persona": persona_label(scenario) if scenario else None,
        "assistant": started.assistant if started else None,
        "retry_of": started.retry_of if started else None,
    }
    if log.reason in NOT_ASSISTANT_FAULT:
        return SessionScore(**base, score=None, excluded=log.reason)
    if scenario is None or state is None:
        why = "no scenario definition" if scenario is None else "sandbox state unavailable"
        return SessionScore(**base, score=None, excluded="unscorable", error=why)
    try:
        turns = score_turns_of(version)(scenario, log, state, language, judge)
    except Exception as exc:  # noqa: BLE001 - reported as unscored with its reason, never left out
        return SessionScore(**base, score=None, excluded="unscorable", error=f"{type(exc).__name__}: {exc}")
    latencies = [ms for t in turns for ms in t.tools.get("ehr_latency_ms", [])]
    extra = {"judge": judge.describe()} if judge is not None else {}
    return SessionScore(**base, score=round(sum(t.score for t in turns) / len(turns), 6), turns=turns,
                        ehr_latency_p50_ms=median(latencies) if latencies else None, **extra)
