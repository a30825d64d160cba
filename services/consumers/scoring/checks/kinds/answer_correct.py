"""A question-answering suite's answer (FHIR-AgentBench) is the gold SQL result (checks/sql_answer.py)."""

from __future__ import annotations

from contracts.rubric import SqlAnswerParams
from contracts.scenario import RubricItem
from services.consumers.scoring.check_inputs import CheckContext, CheckResult
from services.consumers.scoring.checks.base import RubricCheck
from services.consumers.scoring.checks.retrieval import groups
from services.consumers.scoring.checks.sql_answer import gold_of, judge_answer


class AnswerCorrect(RubricCheck):
    """The turn's answer states the gold SQL result and no other candidate (sql_answer.py)."""

    kind = "answer_correct"
    params = SqlAnswerParams

    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        gold = gold_of(item.params.get("gold") or [], bool(item.params.get("boolean")))
        question = ctx.log.doctor.text if ctx.log.doctor else ""
        passed, evidence = judge_answer(ctx.log.answer_text, gold, question)
        return CheckResult(passed, evidence, {"value": float(passed), "groups": groups(ctx)})
