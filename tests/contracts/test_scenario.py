"""The scenario line format and the message annotations: what other components rely on is enforced."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from contracts.scenario import Scenario
from events.payloads import communication

TEXT = {
    "en": {"explicit": "What is the latest creatinine?", "implicit": "What's the creatinine?"},
    "zh": {"explicit": "最近一次肌酐是多少？", "implicit": "肌酐多少？"},
}


def line(**overrides) -> dict:
    base = {
        "id": "s-1",
        "family": "lab_trend",
        "difficulty": "L1",
        "patient": "Patient/p-1",
        "now": "2150-01-02T08:00:00Z",
        "patient_memory": [
            {
                "id": "m-1",
                "category": "symptom",
                "topics": {"en": ["tired"], "zh": ["累"]},
                "text": {"en": "I feel tired.", "zh": "我觉得累。"},
                "sources": ["Condition/c-1"],
            }
        ],
        "turns": [
            {
                "index": 0,
                "task_type": "lookup",
                "tool_source": "ehr",
                "text": TEXT,
                "facts": [
                    {
                        "kind": "latest",
                        "code": "http://x|50912",
                        "value": 1.2,
                        "unit": "mg/dL",
                        "reference": "Observation/o-1",
                    }
                ],
                "patient_facts": ["m-1"],
                "rubric": [{"id": "t0-fact", "kind": "fact_cited", "params": {"fact": 0}}],
            }
        ],
    }
    return base | overrides


def test_a_valid_line_round_trips_and_picks_the_phrasing() -> None:
    scenario = Scenario.model_validate(line())
    again = Scenario.model_validate_json(scenario.model_dump_json())
    assert again == scenario
    assert scenario.turns[0].text.get("zh", "implicit") == "肌酐多少？"
    assert scenario.memory("m-1").sources == ["Condition/c-1"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"patient": "Observation/x"}, "patient"),
        ({"turns": []}, "turns"),
        ({"patient_memory": []}, "unknown patient facts"),
    ],
)
def test_inconsistent_lines_are_refused(change: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Scenario.model_validate(line(**change))


def test_a_turn_judged_only_by_an_llm_or_forbidding_its_own_writes_is_refused() -> None:
    turn = line()["turns"][0]
    judged = turn | {
        "rubric": [{"id": "j", "kind": "llm_judge", "params": {"criterion": {"en": "x", "zh": "x"}}}]
    }
    with pytest.raises(ValidationError, match="never stands alone"):
        Scenario.model_validate(line(turns=[judged]))
    write = {
        "resource_type": "ServiceRequest",
        "constraints": [{"path": "status", "op": "equals", "value": "active"}],
        "resource": {"resourceType": "ServiceRequest", "status": "active"},
    }
    with pytest.raises(ValidationError, match="forbid_writes"):
        Scenario.model_validate(line(turns=[turn | {"forbid_writes": True, "writes": [write]}]))


def test_messages_carry_turn_disclosed_facts_and_kind_outside_the_text() -> None:
    message = communication(
        "m1", "patient", ["assistant"], "Only at night.", turn=2, disclosed=["m-1", "m-4"], kind="answer"
    )
    assert (message.turn, message.disclosed_facts, message.kind) == (2, ["m-1", "m-4"], "answer")
    assert message.text == "Only at night."
    plain = communication("m2", "doctor", ["assistant"], "Hi")
    assert (plain.turn, plain.disclosed_facts, plain.kind) == (None, [], None)
