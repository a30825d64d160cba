"""The answer is brief: a physician reads it between two patients (words in English, two characters a word in
Chinese)."""

from __future__ import annotations

from contracts.rubric import BriefParams
from contracts.scenario import RubricItem
from services.consumers.scoring.check_inputs import CheckContext, CheckResult
from services.consumers.scoring.checks.base import AnswerCheck


class AnswerBrief(AnswerCheck):
    kind = "answer_brief"
    params = BriefParams

    def judge(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        text = ctx.log.answer_text
        words = len(text.split()) if text.isascii() else (len(text.replace(" ", "")) + 1) // 2
        limit = item.params.get("max_words")
        if not isinstance(limit, int):
            return CheckResult(False, f"rubric max_words {limit!r} is not a number")
        return CheckResult(words <= limit, f"{words} words, at most {limit}")
