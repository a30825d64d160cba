"""The answer concludes the expected verdict or direction (a decision alias names one)."""

from __future__ import annotations

from contracts.rubric import ConclusionParams
from contracts.scenario import RubricItem
from services.consumers.scoring.check_inputs import CheckContext, CheckResult
from services.consumers.scoring.checks.base import AnswerCheck
from services.consumers.scoring.checks.facts import conclusion_matches
from services.consumers.scoring.lexicon import lexicon


class Conclusion(AnswerCheck):
    kind = "conclusion"
    params = ConclusionParams

    def judge(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        expected = str(item.params.get("expected", "")).lower()
        expected = lexicon()["decision_aliases"].get(expected, expected)
        passed, evidence = conclusion_matches(ctx.log.answer_text, expected)
        return CheckResult(passed, evidence)
