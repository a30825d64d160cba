"""A measure (never points): 1 when every gold resource reached the assistant, else 0
(checks/retrieval.py)."""

from __future__ import annotations

from contracts.rubric import NoParams
from contracts.scenario import RubricItem
from services.consumers.scoring.check_inputs import CheckContext, CheckResult
from services.consumers.scoring.checks.base import RubricCheck
from services.consumers.scoring.checks.retrieval import gold_refs, measures, retrieved


def _by_type(gold: set[str], got: set[str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for ref in gold:
        counts = out.setdefault(ref.split("/", 1)[0], [0, 0])
        counts[0] += ref in got
        counts[1] += 1
    return dict(sorted(out.items()))


class RetrievalRecall(RubricCheck):
    kind = "retrieval_recall"
    params = NoParams

    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        gold, got = gold_refs(ctx), retrieved(ctx)
        hit = len(gold & got)
        value = 1.0 if not gold else float(hit == len(gold))
        share = 1.0 if not gold else hit / len(gold)
        return CheckResult(value == 1.0, f"{hit} of {len(gold)} gold resources retrieved",
                           measures(value, ctx, share=round(share, 6), by_type=_by_type(gold, got)))
