"""Scoring one ended session: its log + its scenario + the sandbox's final state -> a SessionScore (the
report model), every rubric item of every turn judged by its check. Pure: same inputs, same scores.

Turn score = weighted passed / total over the items judged (llm_judge items only when a judge is set) —
except that guard items (GUARDS: they pass when nothing happened) earn nothing on their own: a turn that
passes none of its other items scores 0, so an assistant that does nothing scores ≈ 0, not the guards' share.
Turns the session never reached score 0 (the assistant's run ended early). Sessions ended by
infrastructure or patient errors are excluded (score None), never scored 0.
"""

from __future__ import annotations

from statistics import median

from contracts.end_reasons import NOT_ASSISTANT_FAULT
from contracts.rubric import GATES
from contracts.scenario import RubricItem, Scenario
from contracts.score import Check as CheckOut
from contracts.score import SessionScore, TurnScore
from services.consumers.scoring.check_inputs import CheckContext, FinalState, SessionLog
from services.consumers.scoring.turn_parts import Judge, check_item, exchanges, turn_tools

SCORER = "rounds.scoring"
SCORER_VERSION = "4"  # bump when a check's behaviour or a data file changes what passes
OLD_RULES = ("2", "3")  # labels scored by an older version's rules ("3", "3-…", "3.…" by v3/)


def rules_of(version: str | None) -> str:
    """Which rules a scorer-version label is scored by: "2" (and "2-…", "2.…") the version-2 rules
    (guards add points, first matching number), "3" (and "3-…", "3.…") v3/, anything else the current
    (v4/)."""
    label = version or SCORER_VERSION
    return next((old for old in OLD_RULES if label == old or label.startswith((f"{old}-", f"{old}."))), "4")


GUARDS = GATES  # contracts/rubric.py: the kinds that pass when nothing happened


def persona_label(scenario: Scenario) -> str:
    p = scenario.persona
    return f"{p.health_literacy}-literacy/{p.completeness}"


def score_turn(scenario: Scenario, index: int, log: SessionLog, state: FinalState, language: str,
               judge: Judge | None = None) -> TurnScore:
    turn = scenario.turns[index]
    turn_log = log.turns.get(index)
    if turn_log is None or turn_log.doctor is None:
        return TurnScore(index=index, score=0.0, task_type=turn.task_type, reached=False)
    ctx = CheckContext(scenario, turn, turn_log, log, state, language)
    checks: list[CheckOut] = []
    judged: list[dict] = []
    for item in turn.rubric:
        result = check_item(item, ctx, judge)
        if result is None:
            continue
        checks.append(CheckOut(id=item.id, kind=item.kind, passed=result.passed, weight=item.weight,
                               safety=item.safety, evidence=result.evidence))
        if judge is not None and item.kind != "llm_judge" and item.description is not None:
            verdict = judge(item, ctx)
            judged.append({"id": item.id, "judge": verdict.passed, "check": result.passed})
    total = sum(c.weight for c in checks)
    score = sum(c.weight for c in checks if c.passed) / total if total else 0.0
    delivered = [c for c in checks if c.kind not in GUARDS]
    if delivered and not any(c.passed for c in delivered):
        score = 0.0
    extra = {"judge_agreement": judged} if judged else {}
    return TurnScore(index=index, score=round(score, 6), task_type=turn.task_type, checks=checks,
                     exchanges=exchanges(turn_log), reached=True, tools=turn_tools(turn, turn_log), **extra)


def judge_requests(log: SessionLog, scenario: Scenario | None) -> list[tuple[RubricItem, CheckContext]]:
    """What `score_session` with a judge asks it, so a caller can judge ahead (outside a transaction): every
    llm_judge item and every item with a description (the agreement figure) of each reached turn. A judge
    sees the conversation, not the sandbox: the contexts hold an empty final state."""
    if log.reason in NOT_ASSISTANT_FAULT or scenario is None:
        return []
    language = log.started.get("language") or "en"
    requests = []
    for index, turn in enumerate(scenario.turns):
        turn_log = log.turns.get(index)
        if turn_log is None or turn_log.doctor is None:
            continue
        ctx = CheckContext(scenario, turn, turn_log, log, FinalState(), language)
        requests += [(item, ctx) for item in turn.rubric
                     if item.kind == "llm_judge" or item.description is not None]
    return requests


def score_session(log: SessionLog, scenario: Scenario | None, state: FinalState | None,
                  judge: Judge | None = None, version: str | None = None) -> SessionScore:
    """One session under the rules of `version` (default: the current SCORER_VERSION). A session the rules
    cannot score (a bug of Rounds, never of the assistant) is returned unscored with the reason."""
    started = log.started
    language = started.get("language") or "en"
    base = {
        "session": log.session_id,
        "scenario": (scenario.id if scenario else started.get("scenario")) or "-",
        "family": scenario.family if scenario else None,
        "difficulty": scenario.difficulty if scenario else None,
        "language": language,
        "variant": started.get("variant") or "explicit",
        "trial": started.get("trial") or 0,
        "reason": log.reason,
        "run": log.run_id,
        "persona": persona_label(scenario) if scenario else None,
        "assistant": started.get("assistant"),
        "retry_of": started.get("retryOf"),
    }
    if log.reason in NOT_ASSISTANT_FAULT:
        return SessionScore(**base, score=None, excluded=log.reason)
    if scenario is None or state is None:
        why = "no scenario definition" if scenario is None else "sandbox state unavailable"
        return SessionScore(**base, score=None, excluded="unscorable", error=why)
    try:
        if rules_of(version) == "2":
            turns = [score_turn(scenario, i, log, state, language, judge) for i in range(len(scenario.turns))]
        elif rules_of(version) == "3":
            from services.consumers.scoring.v3.scorer import SessionView, score_turn_v3

            view = SessionView(scenario, log, state)
            turns = [score_turn_v3(scenario, i, log, state, language, view, judge)
                     for i in range(len(scenario.turns))]
        else:
            from services.consumers.scoring.v4.scorer import SessionViewV4, score_turn_v4

            view4 = SessionViewV4(scenario, log, state)
            turns = [score_turn_v4(scenario, i, log, state, language, view4, judge)
                     for i in range(len(scenario.turns))]
    except Exception as exc:  # noqa: BLE001 - reported as unscored with its reason, never left out
        return SessionScore(**base, score=None, excluded="unscorable", error=f"{type(exc).__name__}: {exc}")
    latencies = [ms for t in turns for ms in t.tools.get("ehr_latency_ms", [])]
    extra = {"judge": judge.describe()} if judge is not None else {}
    return SessionScore(**base, score=round(sum(t.score for t in turns) / len(turns), 6), turns=turns,
                        ehr_latency_p50_ms=median(latencies) if latencies else None, **extra)
