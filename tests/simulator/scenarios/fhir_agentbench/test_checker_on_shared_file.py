"""The deterministic answer check agrees with the gold of every question of the shared file
(../shared/data/fhir-agentbench/questions_valid.csv, 347 questions): the oracle's answer (the gold in words)
passes, and deliberately wrong answers — the other verdict, another number, another time, another text, a
value where there is none, and lists of candidates holding the gold — fail."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from services.consumers.scoring.checks.sql_answer import Gold, GoldValue, gold_of, judge_answer
from services.simulator.scenarios.fhir_agentbench.rows import Question, read_questions
from services.simulator.scenarios.fhir_agentbench.sessions import reference_answer

SHARED = Path(__file__).resolve().parents[5] / "shared" / "data" / "fhir-agentbench" / "questions_valid.csv"


@pytest.fixture(scope="module")
def questions() -> list[Question]:
    if not SHARED.exists():
        pytest.skip(f"{SHARED} not found")
    return read_questions(SHARED)


def _other(v: GoldValue) -> str:
    if v.kind == "number":
        return f"{(v.number or 0) * 3 + 11.5:g}"
    if v.kind == "time":
        return (v.time + timedelta(days=1, hours=2)).isoformat(sep=" ")  # type: ignore[operator]
    return "Warfarin sodium tablets"


def _wrong(gold: Gold) -> list[str]:
    if gold.shape == "none":
        return ["The value was 42."]
    if gold.shape == "yes_no":
        return ["No." if gold.verdict == "yes" else "Yes."]
    shown = [f"{v.number:g}" if v.kind == "number" else (v.time.isoformat(sep=" ") if v.time else v.text)
             for v in gold.values]
    answers = ["; ".join(_other(v) for v in gold.values)]
    if all(v.kind != "text" for v in gold.values):  # numbers and times: the gold among other candidates
        answers.append("Candidates: " + ", ".join(shown + [_other(v) for v in gold.values]))
    else:
        answers.append(", ".join(shown + ["Heparin", "Aspirin", "Morphine"]))
    return answers


def test_the_oracle_s_answers_pass_and_wrong_ones_fail_on_every_question(questions: list[Question]) -> None:
    assert len(questions) == 347
    disagreements = []
    shapes = set()
    for q in questions:
        gold = gold_of(q.gold, q.boolean)
        shapes.add(gold.shape if gold.shape != "values" else "+".join(sorted({v.kind for v in gold.values})))
        passed, evidence = judge_answer(reference_answer(q), gold, q.question)
        if not passed:
            disagreements.append((q.question_id, "oracle", reference_answer(q), evidence))
        for wrong in _wrong(gold):
            passed, evidence = judge_answer(wrong, gold, q.question)
            if passed:
                disagreements.append((q.question_id, "wrong", wrong, evidence))
    assert disagreements == []
    assert shapes == {"none", "yes_no", "number", "time", "text"}
