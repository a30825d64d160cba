"""A measure (never points): the gold share of the resources that reached the assistant
(checks/retrieval.py)."""

from __future__ import annotations

from contracts.rubric import NoParams
from contracts.scenario import RubricItem
from services.consumers.scoring.check_inputs import CheckContext, CheckResult
from services.consumers.scoring.checks.base import RubricCheck
from services.consumers.scoring.checks.retrieval import gold_refs, measures, retrieved


class RetrievalPrecision(RubricCheck):
    kind = "retrieval_precision"
    params = NoParams

    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        gold, got = gold_refs(ctx), retrieved(ctx)
        value = len(gold & got) / len(got) if got else 0.0
        return CheckResult(value == 1.0, f"{len(gold & got)} of {len(got)} retrieved resources are gold",
                           measures(value, ctx, retrieved=len(got)))
