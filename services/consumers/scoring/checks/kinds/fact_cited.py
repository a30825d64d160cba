"""The answer states the turn's fact (facts.py: a claim about its subject, its value within tolerance)."""

from __future__ import annotations

from contracts.rubric import FactParams
from contracts.scenario import RubricItem
from services.consumers.scoring.check_inputs import CheckContext, CheckResult
from services.consumers.scoring.checks.base import AnswerCheck
from services.consumers.scoring.checks.facts import fact_stated


class FactCited(AnswerCheck):
    kind = "fact_cited"
    params = FactParams

    def judge(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        index = item.params.get("fact")
        if not isinstance(index, int) or not 0 <= index < len(ctx.turn.facts):
            return CheckResult(False, f"rubric names fact {index!r}, the turn has {len(ctx.turn.facts)}")
        passed, evidence = fact_stated(ctx.log.answer_text, ctx.turn.facts[index])
        return CheckResult(passed, evidence)
