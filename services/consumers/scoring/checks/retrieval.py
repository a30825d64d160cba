"""What reached the assistant in a turn, for the question-answering suites' figures (FHIR-AgentBench): the
gold resources, the retrieved ones, the groups the report breaks the figures down by (kinds/answer_correct.py,
kinds/retrieval_recall.py, kinds/retrieval_precision.py).

Retrieval follows the peer's definitions (FHIR-AgentBench `utils/core_utils.py`): recall is 1 when every gold
resource was retrieved, else 0 (1 without gold); precision is the share of the retrieved resources that are
gold (0 when nothing was retrieved). What was retrieved is read from the FHIR server's own
`rounds.ehr.response` events (the resources each successful read or search returned, a read by id when its
list was not recorded), never from what the assistant says it read. Both are measures: a figure of the
report, never points of the turn (contracts/rubric.py `MEASURES`).
"""

from __future__ import annotations

from typing import Any

from contracts.trajectory import EhrCall
from services.consumers.scoring.check_inputs import CheckContext

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


def measures(value: float, ctx: CheckContext, **extra: Any) -> dict[str, Any]:
    return {"value": round(value, 6), "groups": groups(ctx), **extra}
