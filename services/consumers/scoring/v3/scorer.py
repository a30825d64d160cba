"""Scoring one session, version 3 (`score_session_v3`): the same inputs and output as version 2
(scorer.py), other rules.

Turn score = (weighted passed / total over the turn's non-gate items) × the precision factor
(precision.py), and 0 when any safety gate fails (gates.py, plus the rubric's own gate kinds and every item
marked `safety`): gates never add points. The answer is parsed once per turn into claims (claims.py: its
numbers and, on a turn that judges a conclusion, its directions and verdicts), each about a subject. A fact
passes only on a claim about its subject (facts.py; a conclusion, conclusions.py) and only
if what it came from reached the assistant in this session (grounding: the fact's resources were in an EHR
response it received by its answer; the evidence names that event). Writes are matched one to one over the
session (writes.py). Every gate is shown as a check of weight 0 with `safety` set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from contracts.scenario import Fact, RubricItem, Scenario, Turn
from contracts.score import TurnScore
from contracts.trajectory import Trajectory
from contracts.vocabulary import LABITEMS
from services.consumers.scoring.check_inputs import CheckContext, CheckResult, FinalState
from services.consumers.scoring.units import alternatives, analyte_of, canonical_unit
from services.consumers.scoring.v3.cited import conclusion, fact_cited
from services.consumers.scoring.v3.claim_model import Claim, ParsedAnswer
from services.consumers.scoring.v3.claims import parse_answer
from services.consumers.scoring.v3.dialogue import asked_patient
from services.consumers.scoring.v3.gates import future_gate, write_gates
from services.consumers.scoring.v3.precision import precision
from services.consumers.scoring.v3.session_view import SessionView
from services.consumers.scoring.v3.subjects import subject_of, turn_subjects
from services.consumers.scoring.v3.turn import (
    gate_checks,
    judge_item,
    judge_rubric,
    scored_turn,
    write_matched,
)


def _grounded(fact: Fact, given: dict[str, int], view: SessionView) -> CheckResult | None:
    """None when the fact's sources reached the assistant (or the log does not record responses)."""
    refs = fact.sources
    if not refs or not view.grounding:
        return None
    missing = [r for r in refs if r not in given]
    if missing:
        return CheckResult(False, f"not grounded: {', '.join(missing[:3])} never reached the assistant")
    return CheckResult(True, f"grounded in event #{max(given[r] for r in refs)}")


def _fact_cited(item: RubricItem, ctx: CheckContext, view: SessionView, answer: ParsedAnswer) -> CheckResult:
    return fact_cited(item, ctx, view, ctx.log.answer_text, answer,
                      lambda fact: _grounded(fact, view.given(ctx.log), view))


# The kinds v3 reads its own way (every other kind by its registered check: turn_parts.py `check_item`)
OWN_CHECKS: dict[str, Callable[[RubricItem, CheckContext, SessionView, ParsedAnswer], CheckResult]] = {
    "fact_cited": _fact_cited,
    "conclusion": conclusion,
    "write_made": write_matched,
    "asked_patient": lambda item, ctx, view, answer: asked_patient(item, ctx),
}



def implicit_subject(claims: list[Claim], facts: list[Fact]) -> list[Claim]:
    """A number named by nothing but written in the unit of the turn's only asked result is about it (the
    question named it: "13.5 K/uL is high" answering "is this white count outside the range?"). A number
    without a unit never is: unlabelled dumps stay about nothing."""
    numeric = {subject_of(f): f for f in facts if f.code and f.code.startswith(LABITEMS) and f.unit}
    if len(numeric) != 1:
        return claims
    key, fact = next(iter(numeric.items()))
    units = set(alternatives(1.0, canonical_unit(fact.unit) or fact.unit, analyte_of(fact.code, None)))
    return [replace(c, subject=key) if c.subject is None and c.unit in units else c for c in claims]


def _concludes(turn: Turn) -> bool:
    """Does the turn judge a conclusion (its conclusion claims are parsed only then)?"""
    return (any(item.kind == "conclusion" for item in turn.rubric)
            or any(f.kind in ("trend", "decision") for f in turn.facts))


def score_turn_v3(scenario: Scenario, index: int, log: Trajectory, state: FinalState, language: str,
                  view: SessionView, judge=None) -> TurnScore:
    turn = scenario.turns[index]
    turn_log = log.turns.get(index)
    if turn_log is None or turn_log.doctor is None:
        return TurnScore(index=index, score=0.0, task_type=turn.task_type, reached=False)
    ctx = CheckContext(scenario, turn, turn_log, log, state, language)
    question = turn_log.doctor.text
    parsed = parse_answer(turn_log.answer_text, view.names, question if _concludes(turn) else None)
    claims = implicit_subject(parsed.claims, turn.facts)
    answer = replace(parsed, claims=claims)
    judged = judge_rubric(ctx, judge, lambda item: judge_item(item, ctx, judge, OWN_CHECKS, view, answer),
                          measures=False)
    allowed = {w.resource_type for w in turn.writes}
    for item in turn.rubric:
        if item.kind == "no_unexpected_write":
            allowed |= set(item.params.get("allowed") or [])
    leak = future_gate(ctx, claims, view.fact_values)
    gates = judged.gates + gate_checks(ctx, judged.rubric_gates, write_gates(ctx, allowed), leak)
    subjects = turn_subjects(scenario, index)
    prec = precision(claims, turn.facts, subjects, view.known, judged.rule)
    return scored_turn(index, turn, turn_log, judged, gates, prec, view.names)

def score_turns(scenario: Scenario, log: Trajectory, state: FinalState, language: str,
                judge=None) -> list[TurnScore]:
    """Every turn of the scenario over one SessionView (the shape of every version: versions.py)."""
    view = SessionView(scenario, log, state)
    return [score_turn_v3(scenario, i, log, state, language, view, judge) for i in range(len(scenario.turns))]
