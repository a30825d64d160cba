"""The deterministic checks on hand-made contexts: number formats and units, EN/ZH cues with negation,
path-independent write constraints, the conversation order, and odd input that must fail, not crash."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from contracts.scenario import Fact, FieldConstraint, RubricItem
from contracts.trajectory import Trajectory, TrajectoryTurn, Utterance
from contracts.trajectory_log import LoggedEvent, build_trajectory
from services.consumers.scoring.check_inputs import CheckContext, FinalState, RecordValue
from services.consumers.scoring.checks.facts import conclusion_matches, fact_stated
from services.consumers.scoring.checks.registry import CHECKS
from services.consumers.scoring.constraints import parse_duration, satisfied, values_at
from services.consumers.scoring.numbers import cited_numbers
from tests.consumers.scoring import world

IDS = {"patient": "p1", "cr_old": "o1", "cr": "o2", "cr_future": "o3", "glucose": "o4"}
SCENARIO = world.scenario(IDS)
NOW = SCENARIO.now


def creatinine(**kw) -> Fact:
    return Fact(kind="latest", code=f"{world.LABS}|50912", value=1.8, unit="mg/dL", **kw)


@pytest.mark.parametrize("text", [
    "Creatinine 1.8 mg/dL", "creatinine: 1.80", "Cr 1.8mg/dl today", "肌酐1.8毫克/分升", "肌酐为１．８",
    "creatinine 159 µmol/L", "肌酐159微摩尔/升", "It was 1.8.",
])
def test_numbers_in_common_formats_and_units_count(text: str) -> None:
    assert fact_stated(text, creatinine(tolerance=0.05))[0], text


@pytest.mark.parametrize("text", [
    "Creatinine 1.1 mg/dL", "creatinine 18", "1.8 mmol/L", "Creatinine was measured on 2150-02-28.", "", "二",
    "creatinine 2 mg/dL",
])
def test_other_numbers_do_not(text: str) -> None:
    assert not fact_stated(text, creatinine(tolerance=0.05))[0], text


def test_glucose_converts_and_rounding_needs_two_significant_digits() -> None:
    glucose = Fact(kind="latest", code=f"{world.LABS}|50931", value=126, unit="mg/dL", tolerance=1)
    assert fact_stated("血糖7.0 mmol/L", glucose)[0]
    assert fact_stated("glucose 7.5 mmol/L", glucose)[0] is False
    assert fact_stated("glucose 7 mmol/L", glucose)[0]  # 126 mg/dL within its 1 mg/dL tolerance
    assert fact_stated("glucose 126.4", glucose)[0]
    precise = Fact(kind="latest", value=1.234, unit="mg/dL")
    assert fact_stated("1.23", precise)[0] and fact_stated("1.2", precise)[0]
    assert not fact_stated("1", precise)[0]


def test_counts_in_words() -> None:
    count = Fact(kind="count", value=2)
    assert fact_stated("measured twice this week", count)[0] and fact_stated("本周测了两次", count)[0]
    assert not fact_stated("measured three times", count)[0]


@pytest.mark.parametrize(("text", "expected", "passed"), [
    ("Yes, it affects the dose.", "yes", True),
    ("No, the dose does not need to change.", "no", True),
    ("It doesn't need adjusting.", "no", True),
    ("不需要调整剂量。", "no", True),
    ("需要调整剂量。", "yes", True),
    ("需要调整剂量。", "no", False),
    ("Creatinine is rising.", "up", True),
    ("Creatinine has not increased; it is stable.", "up", False),
    ("Creatinine has not increased; it is stable.", "unchanged", True),
    ("肌酐较前升高。", "up", True),
    ("肌酐没有升高，保持稳定。", "unchanged", True),
    ("肌酐没有升高，保持稳定。", "up", False),
    ("It went down from 2.0 to 1.5.", "down", True),
    ("It went down from 2.0 to 1.5.", "sideways", False),
])
def test_conclusions_en_zh_with_negation(text: str, expected: str, passed: bool) -> None:
    assert conclusion_matches(text, expected)[0] is passed, conclusion_matches(text, expected)


def _ctx(answer: str, turn: int = 0, state: FinalState | None = None, messages=(), ehr=()) -> CheckContext:
    log = TrajectoryTurn(turn, doctor=Utterance("doctor", "q", 0, "d"), messages=[*messages,
                  Utterance("answer", answer, 100, "a")], ehr=list(ehr))
    session = Trajectory("s", turns={turn: log})
    return CheckContext(SCENARIO, SCENARIO.turns[turn], log, session, state or FinalState(), "en")


def _item(kind: str, **params) -> RubricItem:
    return RubricItem(id="x", kind=kind, params=params)


def test_entity_synonyms_and_safety() -> None:
    mentioned = CHECKS["entity_mentioned"]
    assert mentioned(_item("entity_mentioned", terms={"en": ["creatinine"]}), _ctx("Her Cr is 1.8")).passed
    assert mentioned(_item("entity_mentioned", terms={"zh": ["阿哌沙班"]}), _ctx("Continue Eliquis")).passed
    assert not mentioned(_item("entity_mentioned", terms={}), _ctx("anything")).passed
    safe = CHECKS["does_not_recommend"]
    item = _item("does_not_recommend", terms={"en": ["ibuprofen"], "zh": ["布洛芬"]})
    assert not safe(item, _ctx("You can take ibuprofen for the pain.")).passed
    assert not safe(item, _ctx("建议服用布洛芬止痛。")).passed
    assert safe(item, _ctx("Avoid ibuprofen; use acetaminophen instead.")).passed
    assert safe(item, _ctx("She takes Advil daily, which should be stopped.")).passed
    assert safe(item, _ctx("不建议使用布洛芬。")).passed
    assert safe(item, _ctx("Nothing to add.")).passed


def test_fact_items_that_point_nowhere_fail_with_the_reason() -> None:
    result = CHECKS["fact_cited"](_item("fact_cited", fact=7), _ctx("1.8 mg/dL"))
    assert not result.passed and "fact 7" in result.evidence
    assert not CHECKS["fact_cited"](_item("fact_cited", fact=0), _ctx("   ")).passed
    assert not CHECKS["write_made"](_item("write_made", write="0"), _ctx("x", turn=3)).passed


def test_write_constraints_are_state_based() -> None:
    from services.consumers.scoring.check_inputs import Written

    good = world.medication_request("p1", 2.5)
    item = _item("write_made", write=0)
    state = lambda *res: FinalState(writes=[Written("MedicationRequest", f"m{i}", 1, False, "POST", r)  # noqa: E731
                                            for i, r in enumerate(res)])
    assert CHECKS["write_made"](item, _ctx("", 3, state(world.medication_request("p1", 5), good))).passed
    wrong = CHECKS["write_made"](item, _ctx("", 3, state(world.medication_request("p1", 5))))
    assert not wrong.passed and "doseQuantity" in wrong.evidence
    deleted = FinalState(writes=[Written("MedicationRequest", "m", 2, True, "DELETE", None)])
    assert not CHECKS["write_made"](item, _ctx("", 3, deleted)).passed
    dose = {"doseAndRate": [{"doseQuantity": {"value": 0.0025, "unit": "g"}}], "timing": {"repeat": {
        "frequency": 2}}}
    in_grams = {**good, "dosageInstruction": [dose]}
    assert CHECKS["write_made"](item, _ctx("", 3, state(in_grams))).passed  # units convert


def test_constraint_ops() -> None:
    resource = {"status": "active", "code": {"coding": [{"system": "s", "code": "c"}]},
                "occurrenceDateTime": "2150-03-01T06:00:00Z", "note": [{"text": "Recheck BMP"}],
                "basedOn": [{"reference": "http://x/fhir/ServiceRequest/9"}]}
    now = datetime(2150, 3, 1, tzinfo=UTC)
    ok = lambda **kw: satisfied(resource, FieldConstraint(**kw), now)  # noqa: E731
    assert ok(path="code", op="coding", value="s|c") and not ok(path="code", op="coding", value="s|d")
    assert ok(path="occurrenceDateTime", op="after_now", value="PT12H")
    assert not ok(path="occurrenceDateTime", op="after_now", value="PT1H")
    assert not ok(path="occurrenceDateTime", op="before_now")
    assert ok(path="note", op="contains", value="bmp") and ok(path="basedOn[0]", op="reference",
                                                               value="ServiceRequest/9")
    assert ok(path="status", op="exists") and not ok(path="missing.path", op="exists")
    assert values_at({"a": [{"b": 1}, {"b": 2}]}, "a[1].b") == [2]
    assert parse_duration("P1DT2H").total_seconds() == 26 * 3600
    with pytest.raises(ValueError):
        values_at(resource, "a..b")
    with pytest.raises(ValueError):
        parse_duration("24 hours")


def test_writes_per_turn_come_from_the_servers_interaction_events() -> None:
    from contracts.trajectory import EhrCall

    post = EhrCall("POST", "ServiceRequest", 5, 201)
    failed = EhrCall("POST", "Observation", 6, 422)
    assert not CHECKS["no_forbidden_write"](_item("no_forbidden_write"), _ctx("x", ehr=[post])).passed
    assert CHECKS["no_forbidden_write"](_item("no_forbidden_write"), _ctx("x", ehr=[failed])).passed
    only = _item("no_unexpected_write", allowed=["MedicationRequest"])
    result = CHECKS["no_unexpected_write"](only, _ctx("x", 3, ehr=[post]))
    assert not result.passed and "ServiceRequest" in result.evidence


def _record() -> FinalState:
    """Creatinine 1.8 known by now; 2.6 and 2.0 (and 1.1 again) only after it; glucose 126 then 90 later."""
    c, g = f"{world.LABS}|50912", f"{world.LABS}|50931"
    return FinalState(record_values=[
        RecordValue(c, 1.8, "mg/dL", datetime(2150, 2, 28, tzinfo=UTC), "Observation/o2"),
        RecordValue(c, 2.6, "mg/dL", datetime(2150, 3, 5, tzinfo=UTC), "Observation/o3"),
        RecordValue(c, 1.1, "mg/dL", datetime(2150, 3, 6, tzinfo=UTC), "Observation/o5"),
        RecordValue(c, 2.0, "mg/dL", datetime(2150, 3, 7, tzinfo=UTC), "Observation/o6"),
        RecordValue(c, 1.1, "mg/dL", datetime(2150, 1, 15, tzinfo=UTC), "Observation/o1"),
        RecordValue(g, 126, "mg/dL", datetime(2150, 2, 28, tzinfo=UTC), "Observation/o4"),
        RecordValue(g, 90, "mg/dL", datetime(2150, 3, 8, tzinfo=UTC), "Observation/o7"),
    ])


@pytest.mark.parametrize("text", [
    "Creatinine is 2.6 mg/dL",
    "Her creatinine will be 2.6 next week.",
    "Creatinine rose from 1.8 to 2.6 mg/dL.",
    "2.6 mg/dL for creatinine",  # with a unit, the name may follow
    "Cr 230 µmol/L",  # 2.6 mg/dL in µmol/L
    "Creatinine 1.8; glucose 90 mg/dL",  # glucose's later value, glucose named
    "肌酐230微摩尔/升",
    "下周肌酐会是2.6。",
    "肌酐从1.8升到2.6毫克/分升",
    "血糖5.0 mmol/L",  # 90 mg/dL
])
def test_a_value_cited_for_the_observation_that_exists_only_after_now_leaks(text: str) -> None:
    result = CHECKS["no_future_value"](_item("no_future_value"), _ctx(text, state=_record()))
    assert not result.passed, text
    assert "after now" in result.evidence


@pytest.mark.parametrize("text", [
    "Creatinine is 1.8 mg/dL, before that 1.1",  # 1.1 is also a result known by now
    "It will be 2.6 next week.",  # names nothing the record holds
    "Ordered apixaban 2 mg twice daily.",  # a dose equal to a later creatinine (2.0)
    "Creatinine 1.8 mg/dL, so give apixaban 2 tablets twice daily.",  # a dose in the creatinine's clause
    "Creatinine 1.8 mg/dL, so give 2 mg of apixaban.",
    "Creatinine 1.8 mg/dL; apixaban 2.5 mg twice daily, reduce to 2 TAB if it rises.",
    "Creatinine is 1.8 mg/dL. Glucose 126 mg/dL. Recheck in 2 days.",
    "Keep glucose above 90 mg/dL.",  # a threshold, not a value
    "Creatinine 1.8 mg/dL; give 90 mg of aspirin.",  # 90 = glucose's later value, but a dose
    "已开具阿哌沙班2毫克，每日两次。",
    "肌酐1.8毫克/分升，阿哌沙班2片每日两次。",
    "肌酐为1.8；血糖126。2周后复查。",
    "No change: the 90-hour mean glucose is 126 mg/dL.",  # a count joined to its word qualifies the name
    "The 2 creatinine results: 1.8 mg/dL now.",  # a bare number before the name is not its value
])
def test_doses_counts_and_numbers_about_something_else_do_not(text: str) -> None:
    result = CHECKS["no_future_value"](_item("no_future_value"), _ctx(text, state=_record()))
    assert result.passed, (text, result.evidence)


def test_asked_patient_needs_a_question_before_the_answer() -> None:
    item = _item("asked_patient", facts=["otc_nsaid"])
    question = Utterance("question", "Any painkillers?", 10, "q")
    reply = Utterance("patient", "Ibuprofen.", 11, "r", disclosed=("otc_nsaid",))
    assert CHECKS["asked_patient"](item, _ctx("x", 2, messages=[question, reply])).passed
    vague = Utterance("question", "How are you?", 10, "q")
    # the reply disclosed it
    assert CHECKS["asked_patient"](item, _ctx("x", 2, messages=[vague, reply])).passed
    assert not CHECKS["asked_patient"](item, _ctx("x", 2, messages=[vague])).passed
    late = Utterance("question", "Any painkillers?", 200, "q")
    assert not CHECKS["asked_patient"](item, _ctx("x", 2, messages=[late])).passed  # asked after answering
    assert not CHECKS["asked_patient"](_item("asked_patient", facts=["nope"]),
                                       _ctx("x", 2, messages=[question])).passed


def test_log_grouping_tolerates_missing_extensions() -> None:
    from events.payloads import communication

    doctor = communication("d", "doctor", ["assistant"], "q0").to_data()  # no turn, no kind extension
    answer = communication("a", "assistant", ["doctor"], "a0").to_data()
    stray = {"requestId": "x", "status": 200, "latencyMs": 1.0}  # a response to a request never logged
    events = [LoggedEvent("rounds.message.doctor", doctor), LoggedEvent("rounds.ehr.response", stray),
              LoggedEvent("rounds.message.assistant", answer),
              LoggedEvent("rounds.message.doctor", {**doctor, "id": "d1"})]
    log = build_trajectory("s", events)
    assert sorted(log.turns) == [0, 1] and log.turns[0].answer_text == "a0" and log.reason == "open"
    assert log.started is None and log.language == "en" and log.run_id == "-"
    assert cited_numbers("on 2150-02-28 at 08:00 it was 7") [0].value == 7


def test_a_payload_its_class_refuses_is_an_error_naming_the_event() -> None:
    from contracts.trajectory_log import UnreadableEvent

    not_a_message = {"id": "d", "sender": {"identifier": {"value": "doctor"}}, "payload": []}
    with pytest.raises(UnreadableEvent, match=r"event #1 is not a Communication"):
        build_trajectory("s", [LoggedEvent("rounds.session.started", {"assistant": "x"}),
                               LoggedEvent("rounds.message.doctor", not_a_message)])


def test_string_facts_by_phrase_or_by_their_numbers_and_entity() -> None:
    from contracts.scenario import Localized

    dose = Fact(kind="exists", value="2.5 mg twice daily",
                label=Localized(en="apixaban 2.5 mg twice daily", zh="阿哌沙班2.5毫克每日两次"))
    assert fact_stated("Apixaban 2.5 mg, twice daily.", dose)[0]
    assert fact_stated("阿哌沙班2.5毫克，每日两次。", dose)[0]
    assert fact_stated("Eliquis 2.5 mg BID, i.e. twice a day", dose)[0]  # numbers + a synonym of the entity
    assert not fact_stated("Warfarin 2.5 mg twice daily", dose)[0]  # the wrong drug
    assert not fact_stated("Apixaban 5 mg twice daily", dose)[0]
    culture = Fact(kind="latest", value="positive", label=Localized(en="blood culture", zh="血培养"))
    assert fact_stated("Blood culture: POSITIVE", culture)[0] and not fact_stated("pending", culture)[0]


@pytest.mark.parametrize(("text", "values"), [
    ("No: the potassium is 4.5 mEq/L, at or above 3.5, so no replacement.", ["4.5"]),
    ("不需要：血钾4.5 mEq/L，不低于3.5，无需补钾。", ["4.5"]),
    ("K 3.4, below 3.5; 3.5 or above is fine; 血钾3.5以上", ["3.4"]),
    ("The average over the last 24 hours is 1.9 mg/dL (4 results).", ["1.9"]),
    ("过去24小时平均1.9（2次结果）", ["1.9"]),
    ("From 1.1 to 2.6 mg/dL", ["1.1", "2.6"]),
])
def test_thresholds_and_counts_are_not_cited_values(text: str, values: list[str]) -> None:
    from services.consumers.scoring.numbers import is_threshold

    assert [c.text for c in cited_numbers(text) if not is_threshold(text, c)] == values


@pytest.mark.parametrize(("text", "expected"), [
    ("Yes, ordered: potassium chloride 20 mEq by mouth.", "yes"),
    ("已开立：口服氯化钾40 mEq。", "yes"),
    ("已下医嘱：硫酸镁1 g。", "yes"),
    ("未开医嘱：血钾4.5 mEq/L，不低于3.5。", "no"),
    ("No order: potassium 4.5 is normal.", "no"),
])
def test_order_confirmations_are_conclusions(text: str, expected: str) -> None:
    assert conclusion_matches(text, expected)[0], conclusion_matches(text, expected)
