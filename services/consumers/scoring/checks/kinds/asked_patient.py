"""The assistant asked the patient about the memory facts before answering (the conversation itself)."""

from __future__ import annotations

from contracts.rubric import PatientParams
from contracts.scenario import MemoryFact, RubricItem, Scenario
from services.consumers.scoring.check_inputs import CheckContext, CheckResult
from services.consumers.scoring.checks.base import RubricCheck
from services.consumers.scoring.lexicon import expand_terms
from services.consumers.scoring.text import find, normalize


def memory_topics(scenario: Scenario, fact_id: str) -> tuple[MemoryFact, list[str]] | None:
    """The patient's memory fact and every name of its topics (EN, ZH, synonyms); None: no such fact."""
    try:
        memory = scenario.memory(fact_id)
    except StopIteration:
        return None
    return memory, expand_terms([t for terms in memory.topics.values() for t in terms])


class AskedPatient(RubricCheck):
    """Every listed memory fact was asked about before the turn's answer: a question to the patient that
    names one of the fact's topics, or a patient reply to a question that disclosed the fact (the simulator
    marks disclosures). Questions from earlier turns count: the patient already told it."""

    kind = "asked_patient"
    params = PatientParams

    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        wanted = [str(f) for f in item.params.get("facts") or ctx.turn.patient_facts]
        if not wanted:
            return CheckResult(False, "rubric item names no patient facts")
        answered_at = ctx.log.answer_position
        limit = answered_at if answered_at is not None else float("inf")
        earlier = [t for i, t in sorted(ctx.session.turns.items()) if i <= ctx.log.index]
        questions = [m for t in earlier for m in t.questions if m.position < limit]
        replies = [m for t in earlier for m in t.patient_replies if m.position < limit]
        if not questions:
            return CheckResult(False, "no question to the patient before the answer")
        missing = []
        for fact_id in wanted:
            disclosed = any(fact_id in reply.disclosed for reply in replies)
            found = memory_topics(ctx.scenario, fact_id)
            if found is None:
                missing.append(f"{fact_id} (unknown fact)")
                continue
            _, topics = found
            targeted = any(find(normalize(q.text), topics) for q in questions)
            if not (disclosed or targeted):
                missing.append(fact_id)
        if missing:
            return CheckResult(False, f"not asked about {', '.join(missing)}")
        return CheckResult(True, f"asked about {', '.join(wanted)} ({len(questions)} questions)")
