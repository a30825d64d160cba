"""One FHIR-AgentBench question as one single-turn Rounds session (contracts/scenario.py).

The physician asks the question with the peer's `assumption` text after it, as the peer's agents get it
("Question: …\\nContext: …"); the patient is `patient_fhir_id`; the clock is after the patient's last data.
The truth is one fact whose references are the gold resources the record holds (what an assistant must
retrieve; the oracle reads them), and the rubric: `answer_correct` (the gold SQL rows), the two retrieval
measures, an `llm_judge` item with the peer's criterion (judged only under `--judge`) and a precision rule
that charges nothing (v4's claim verification judges Rounds' own scenarios, not SQL results). The suite is
English: the ZH text is the EN one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from contracts.scenario import Fact, Localized, Phrasing, RubricItem, Scenario, Turn, TurnText
from services.simulator.scenarios.fhir_agentbench.rows import Question

FAMILY = "fhir-agentbench"
JUDGE_CRITERION = (
    "Question: {question}\nGold answer (the result of the question's SQL on the source tables): {gold}\n"
    "Does the assistant's answer give the same answer as the gold? Equivalent wording, units and rounding "
    "to the gold's precision are fine; 1/0 of a yes/no question mean yes/no; [] or [[None]] mean that the "
    "record holds no such data. An answer that lists several candidates, or only part of a list gold, does "
    "not match."
)


def reference_answer(question: Question) -> str:
    """The gold in a clinician's words (what the oracle says)."""
    values = [v for row in question.gold for v in row]
    if not values or all(v is None for v in values):
        return "No record: the chart holds no such data."
    if question.boolean and len(values) == 1 and isinstance(values[0], int | float):
        return "Yes." if values[0] else "No."
    return "; ".join(dict.fromkeys(_shown(v) for v in values if v is not None)) + "."


def _shown(value: Any) -> str:
    if isinstance(value, float):
        return repr(value).removesuffix(".0") if value == int(value) else repr(value)
    return " ".join(str(value).split())


def _item(kind: str, params: dict[str, Any] | None = None, **extra: Any) -> RubricItem:
    return RubricItem(id=kind, kind=kind, params=params or {}, **extra)  # type: ignore[arg-type]


def session(question: Question, kept: dict[str, list[str]], now: datetime) -> Scenario:
    """The session of `question` with the gold ids the record holds (`kept`) at clock `now`."""
    words = question.question + (f"\n{question.assumption}" if question.assumption else "")
    text = TurnText(en=Phrasing(explicit=words, implicit=words), zh=Phrasing(explicit=words, implicit=words))
    refs = [f"{kind}/{rid}" for kind, ids in kept.items() for rid in ids]
    facts = [Fact(kind="exists", references=refs)] if refs else []
    gold = repr(question.gold)
    criterion = JUDGE_CRITERION.format(question=question.question, gold=gold)
    rubric = [
        _item("answer_correct", {"gold": question.gold, "boolean": question.boolean}),
        _item("retrieval_recall"),
        _item("retrieval_precision"),
        _item("llm_judge", {"criterion": {"en": criterion, "zh": criterion}}),
        _item("precision", {"per_wrong": 0, "per_extra": 0}),
    ]
    answer = reference_answer(question)
    turn = Turn(index=0, task_type="lookup", tool_source="ehr", text=text, facts=facts, rubric=rubric,
                answer=Localized(en=answer, zh=answer), forbid_writes=True)
    return Scenario(
        id=f"fab-{question.question_id}", family=FAMILY, difficulty="L2",
        patient=f"Patient/{question.patient}", now=now, turns=[turn],
        source={"benchmark": "FHIR-AgentBench", "question_id": question.question_id, "split": question.split,
                "main_table": question.main_table, "template": question.template, "true_answer": gold,
                "gold_types": sorted(kept), "row": question.row},
    )
