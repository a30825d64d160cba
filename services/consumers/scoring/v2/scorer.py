"""One session's turns under scorer version 2: every rubric item judged by the check its kind registers
(checks/registry.py), the turn's score the weighted share of the items passed.

Turn score = weighted passed / total over the items judged (llm_judge items only when a judge is set) —
except that gate items (contracts/rubric.py GATES: they pass when nothing happened) earn nothing on their own:
a turn that passes none of its other items scores 0, so an assistant that does nothing scores ≈ 0, not the
gates' share. Turns the session never reached score 0 (the assistant's run ended early).
"""

from __future__ import annotations

from contracts.rubric import GATES
from contracts.scenario import Scenario
from contracts.score import Check, TurnScore
from contracts.trajectory import Trajectory
from services.consumers.scoring.check_inputs import CheckContext, FinalState
from services.consumers.scoring.turn_parts import Judge, check_item, exchanges, turn_tools


def score_turn(scenario: Scenario, index: int, log: Trajectory, state: FinalState, language: str,
               judge: Judge | None = None) -> TurnScore:
    turn = scenario.turns[index]
    turn_log = log.turns.get(index)
    if turn_log is None or turn_log.doctor is None:
        return TurnScore(index=index, score=0.0, task_type=turn.task_type, reached=False)
    ctx = CheckContext(scenario, turn, turn_log, log, state, language)
    checks: list[Check] = []
    judged: list[dict] = []
    for item in turn.rubric:
        result = check_item(item, ctx, judge)
        if result is None:
            continue
        checks.append(Check(id=item.id, kind=item.kind, passed=result.passed, weight=item.weight,
                               safety=item.safety, evidence=result.evidence))
        if judge is not None and item.kind != "llm_judge" and item.description is not None:
            verdict = judge(item, ctx)
            judged.append({"id": item.id, "judge": verdict.passed, "check": result.passed})
    total = sum(c.weight for c in checks)
    score = sum(c.weight for c in checks if c.passed) / total if total else 0.0
    delivered = [c for c in checks if c.kind not in GATES]
    if delivered and not any(c.passed for c in delivered):
        score = 0.0
    extra = {"judge_agreement": judged} if judged else {}
    return TurnScore(index=index, score=round(score, 6), task_type=turn.task_type, checks=checks,
                     exchanges=exchanges(turn_log), reached=True, tools=turn_tools(turn, turn_log), **extra)


def score_turns(scenario: Scenario, log: Trajectory, state: FinalState, language: str,
                judge: Judge | None = None) -> list[TurnScore]:
    """Every turn of the scenario (the shape every version's `score_turns` has: versions.py)."""
    return [score_turn(scenario, i, log, state, language, judge) for i in range(len(scenario.turns))]
