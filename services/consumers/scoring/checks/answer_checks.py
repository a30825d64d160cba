"""Question-answering suites' checks (FHIR-AgentBench): the answer is the gold SQL result (sql_answer.py), and
the retrieval figures from the event log — which resources reached the assistant before its answer.

Retrieval follows the peer's definitions (FHIR-AgentBench `utils/core_utils.py`): recall is 1 when every gold
resource was retrieved, else 0 (1 without gold); precision is the share of the retrieved resources that are
gold (0 when nothing was retrieved). What was retrieved is read from the FHIR server's own
`rounds.ehr.response` events (the resources each successful read or search returned, a read by id when its
list was not recorded), never from what the assistant says it read. Both are measures: a figure of the
report, never points of the turn (contracts/rubric.py `MEASURES`).
"""

from __future__ import annotations

from typing import Any

from contracts.scenario import RubricItem
from contracts.trajectory import EhrCall
from services.consumers.scoring.check_inputs import CheckContext, CheckResult
from services.consumers.scoring.checks.base import RubricCheck
from services.consumers.scoring.checks.sql_answer import gold_of, judge_answer

GROUPS = ("main_table", "template")  # the scenario source's keys the report breaks these figures down by


def groups(ctx: CheckContext) -> dict[str, str]:
    source = ctx.scenario.source or {}
    return {key: str(source[key]) for key in GROUPS if source.get(key) is not None}


def gold_refs(ctx: CheckContext) -> set[str]:
    return {f"{kind}/{rid}" for kind, ids in ctx.turn.sources_by_type().items() for rid in ids}


def retrieved(ctx: CheckContext) -> set[str]:
    """"Type/id" of every resource a successful request of the turn returned before its answer."""
    until = ctx.log.answer_position
    out: set[str] = set()
    for call in ctx.log.ehr:
        if call.succeeded and not call.is_write and (until is None or call.position < until):
            out.update(_returned(call))
    return out


def _returned(call: EhrCall) -> tuple[str, ...]:
    if call.resources is not None:
        return tuple(call.resources)
    parts = call.url.split("?", 1)[0].strip("/").split("/")
    return (f"{parts[0]}/{parts[1]}",) if len(parts) == 2 and parts[0][:1].isupper() else ()


class AnswerCorrect(RubricCheck):
    """The turn's answer states the gold SQL result and no other candidate (sql_answer.py)."""

    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        gold = gold_of(item.params.get("gold") or [], bool(item.params.get("boolean")))
        question = ctx.log.doctor.text if ctx.log.doctor else ""
        passed, evidence = judge_answer(ctx.log.answer_text, gold, question)
        return CheckResult(passed, evidence, {"value": float(passed), "groups": groups(ctx)})


def _by_type(gold: set[str], got: set[str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for ref in gold:
        counts = out.setdefault(ref.split("/", 1)[0], [0, 0])
        counts[0] += ref in got
        counts[1] += 1
    return dict(sorted(out.items()))


def _measures(value: float, ctx: CheckContext, **extra: Any) -> dict[str, Any]:
    return {"value": round(value, 6), "groups": groups(ctx), **extra}


class RetrievalRecall(RubricCheck):
    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        gold, got = gold_refs(ctx), retrieved(ctx)
        hit = len(gold & got)
        value = 1.0 if not gold else float(hit == len(gold))
        share = 1.0 if not gold else hit / len(gold)
        return CheckResult(value == 1.0, f"{hit} of {len(gold)} gold resources retrieved",
                           _measures(value, ctx, share=round(share, 6), by_type=_by_type(gold, got)))


class RetrievalPrecision(RubricCheck):
    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        gold, got = gold_refs(ctx), retrieved(ctx)
        value = len(gold & got) / len(got) if got else 0.0
        return CheckResult(value == 1.0, f"{len(gold & got)} of {len(got)} retrieved resources are gold",
                           _measures(value, ctx, retrieved=len(got)))
