"""What a rubric check is: a small object, called with a rubric item and its context, returning a typed
result (CheckResult), which the scorer reports as a contracts/score.py `Check`."""

from __future__ import annotations

from typing import ClassVar

from contracts.rubric import Params
from contracts.scenario import RubricItem
from services.consumers.scoring.check_inputs import CheckContext, CheckResult


class RubricCheck:
    """Subclasses implement `__call__` and are named by the kinds they judge (contracts/rubric.py); they
    never raise on odd input (a malformed item is a failed check with the reason as evidence — a scenario
    bug must not stop a run)."""

    kind: ClassVar[str]  # the contracts/rubric.py kind it judges: the registry finds it by this
    params: ClassVar[type[Params]]  # that kind's parameter model (the registry holds it to the contract's)

    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        raise NotImplementedError


class AnswerCheck(RubricCheck):
    """A check of something the answer must say: a turn without an answer fails it."""

    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        if not ctx.log.answer_text.strip():
            return CheckResult(False, "no answer in this turn")
        return self.judge(item, ctx)

    def judge(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        raise NotImplementedError


def localized_terms(params: dict, key: str = "terms") -> list[str]:
    """Terms of an item in both languages (an answer may name a drug in either)."""
    terms = params.get(key) or {}
    if isinstance(terms, list):
        return [str(t) for t in terms]
    return [str(t) for values in terms.values() for t in (values or [])]
