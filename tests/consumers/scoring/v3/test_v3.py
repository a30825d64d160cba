"""Scorer version 3 on in-memory sessions of the world scenario: each rule of version 3 with the way it
used to be gamed, and version 2 still runnable beside it."""

from __future__ import annotations

import pytest

from contracts.scenario import Fact
from services.consumers.scoring.scorer import SCORER_VERSION, score_session
from services.consumers.scoring.v3.claims import parse_claims
from services.consumers.scoring.v3.conclusions import conclusion
from services.consumers.scoring.v3.subjects import subject_names
from tests.consumers.scoring.v3.v3_world import LAB, SCENARIO, apixaban, log

CR, GLU = f"{LAB}|50912", f"{LAB}|50931"


def score(answers=None, **kw):
    session, state = log(answers, **kw)
    return score_session(session, SCENARIO, state, version="3")


def turn(result, index):
    return result.turns[index]


def check(result, index, check_id):
    return next(c for c in result.turns[index].checks if c.id == check_id)


def test_reference_answers_score_full_marks_in_both_languages() -> None:
    assert SCORER_VERSION == "4"  # version 3 stays runnable by its label
    for language in ("en", "zh"):
        result = score(writes={3: [apixaban()]}, language=language)
        failed = [(t.index, c.id, c.evidence) for t in result.turns for c in t.checks if not c.passed]
        assert result.score == 1.0, failed


def test_claims_are_attributed_to_their_subject_en_and_zh() -> None:
    names = subject_names(SCENARIO)
    claims = parse_claims("Creatinine 1.8 mg/dL (28 Feb), glucose 7.0 mmol/L; potassium chloride 20 mEq, "
                          "range 4-11.", names)
    about = [(c.subject, c.value, c.unit) for c in claims if not c.threshold]
    assert about == [(CR, 1.8, "mg/dL"), (GLU, 7.0, "mmol/L"), ("drug:potassium_chloride", 20.0, "mEq")]
    zh = parse_claims("肌酐为1.8毫克/分升，血糖126。", names)
    assert [(c.subject, c.value) for c in zh] == [(CR, 1.8), (GLU, 126.0)]
    unknown = parse_claims("creatinine 1.8 mgs", names)[0]
    assert unknown.unit_unknown and unknown.subject == CR


@pytest.mark.parametrize("answer, why", [
    ("1.1 1.8 2.6 5.34 126 0 1 2 3", "no claim about"),  # an unlabelled dump
    ("Creatinine 1.8 mmol/L, glucose 126 mg/dL.", "no claim about"),  # a known unit that does not convert
    ("Creatinine 1.8 mgs, glucose 126 mg/dL.", "no claim about"),  # an unknown unit
    ("Creatinine 1.8 mg/dL or creatinine 3.9 mg/dL; glucose 126 mg/dL.", "disagree"),  # hedging two values
    ("Glucose 1.8 mg/dL and 126 mg/dL.", "no claim about"),  # the right number about the wrong subject
])
def test_a_fact_passes_only_on_a_claim_about_its_subject(answer: str, why: str) -> None:
    evidence = check(score({0: answer}), 0, "t0-cr")
    assert not evidence.passed and why in evidence.evidence


def test_guards_never_add_points_and_safety_gates_zero_the_turn() -> None:
    assert turn(score({0: "Let me look at the creatinine."}), 0).score == 0.0
    leaky = score({0: "Her latest creatinine is 1.8 mg/dL; glucose 126 mg/dL. It will be 2.6 mg/dL on the "
                      "next draw."})
    assert turn(leaky, 0).score == 0.0 and "after now" in check(leaky, 0, "t0-future").evidence
    zh = score({0: "她最近的肌酐为1.8毫克/分升，血糖126。下次会是2.6 mg/dL。"}, language="zh")
    assert turn(zh, 0).score == 0.0
    wrote = score(writes={0: [apixaban("m0")], 3: [apixaban()]})
    assert turn(wrote, 0).score == 0.0 and not check(wrote, 0, "t0-nowrite").passed
    assert wrote.turns[3].score == 1.0  # turn 3 still has an order of its own (one of the two)
    unsafe = score({2: "She takes ibuprofen; give ibuprofen 400 mg for the pain."})
    assert turn(unsafe, 2).score == 0.0


def test_writes_are_matched_one_to_one_and_extra_or_conflicting_ones_fail() -> None:
    spam = score(writes={3: [apixaban("m1"), apixaban("m2")]})
    assert turn(spam, 3).score == 0.0
    assert "2 resources written, 1 expected" in check(spam, 3, "t3-only").evidence
    many = score(writes={3: [apixaban("m1", dose=2.5, doses=20)]})
    assert not check(many, 3, "t3-write").passed and "conflicting" in check(many, 3, "t3-write").evidence
    assert turn(score(writes={3: [apixaban("m1", dose=5)]}), 3).score < 1.0


def test_conclusions_ignore_the_question_and_fail_on_conflicts() -> None:
    question = "Over the last 72 hours, is the creatinine going up, going down or stable?"
    assert conclusion("Creatinine is going up: 1.1 then 1.8.", "up", question)[0]
    assert not conclusion("Over the last 72 hours, is the creatinine going up, going down or stable?", "up",
                          question)[0]
    assert not conclusion("It may be rising.", "up")[0]
    assert not conclusion("数值可能升高也可能正常", "up")[0]
    assert not conclusion("Rising, or perhaps stable; it is unchanged.", "up")[0]
    assert not conclusion("肌酐不是升高，是下降。", "up")[0]
    assert conclusion("是的，异常：13.5 K/uL。", "yes")[0]


def test_precision_an_answer_that_lists_the_chart_scores_like_silence() -> None:
    dump = ("Her latest creatinine is 1.8 mg/dL; glucose 126 mg/dL. "
            + " ".join(f"sodium {130 + i} mEq/L;" for i in range(12)))
    result = score({0: dump})
    assert turn(result, 0).score == 0.0 and "12 unasked" in check(result, 0, "precision").evidence
    wrong = score({0: "Her latest creatinine is 1.8 mg/dL, earlier 3.3 mg/dL; glucose 126 mg/dL."})
    assert not check(wrong, 0, "t0-cr").passed


def test_asked_patient_uses_what_the_patient_disclosed() -> None:
    assert check(score(), 2, "t2-asked").passed
    assert "disclosed from event" in check(score(), 2, "t2-asked").evidence
    assert not check(score(disclosed=()), 2, "t2-asked").passed
    ignored = score({2: "Avoid NSAIDs."})
    assert "does not use" in check(ignored, 2, "t2-asked").evidence


def test_a_fact_counts_only_if_its_source_reached_the_assistant() -> None:
    grounded = check(score(), 0, "t0-cr")
    assert grounded.passed and "grounded in event #1" in grounded.evidence
    blind = check(score(given=("Observation/glu1",)), 0, "t0-cr")
    assert not blind.passed and "never reached the assistant" in blind.evidence
    assert check(score(given=None), 0, "t0-cr").passed  # a log that does not record responses


def test_an_unscorable_session_is_reported_with_its_reason_and_long_answers_are_linear() -> None:
    session, state = log()
    state.writes.append(None)  # type: ignore[arg-type]  # a broken state: a bug of Rounds, not the assistant
    broken = score_session(session, SCENARIO, state, version="3")
    assert broken.score is None and broken.excluded == "unscorable" and broken.error
    long = "Creatinine 1.8 mg/dL, sodium 140 mEq/L, 2.3 4.5; " * 2500  # ~100 KB (bench_answer_size.py)
    assert turn(score({0: long}), 0).score == 0.0  # it scores, as a dump scores
    cues = "Creatinine 1.8 mg/dL, rising; potassium is stable, not falling, may be higher. " * 1250  # ~100 KB
    assert check(score({1: cues}), 1, "t1-trend").passed  # its conclusion claims too, each about its subject


def test_version_2_stays_runnable_beside_version_3() -> None:
    session, state = log({0: "1.1 1.8 126"})
    v2 = score_session(session, SCENARIO, state, version="2")
    v3 = score_session(session, SCENARIO, state, version="3")
    assert check(v2, 0, "t0-cr").passed and not check(v3, 0, "t0-cr").passed


def test_score_events_scores_one_session_from_its_cloudevents() -> None:
    """The entry point an Inspect AI task calls: events in, SessionScore out, no database."""
    import uuid

    from events.catalog import CATALOG
    from events.payloads import SessionEnded, SessionStarted, communication
    from services.consumers.scoring.one_session import score_events

    sc = SCENARIO.model_copy(update={"turns": SCENARIO.turns[:2]})
    events = [CATALOG.make("rounds.session.started", SessionStarted(
        assistant="t", patient=sc.patient, scenario=sc.id, as_of=sc.now, run_id="r", trial=0, language="en",
        variant="explicit", scenario_definition=sc.model_dump(mode="json")), source="/t", subject="s9")]
    for t in sc.turns:
        for sender, to, text in (("doctor", "assistant", t.text.en.explicit),
                                 ("assistant", "doctor", t.answer.en)):
            events.append(CATALOG.make(f"rounds.message.{sender}", communication(
                uuid.uuid4().hex[:12], sender, [to], text, turn=t.index), source="/t", subject="s9"))
    events.append(CATALOG.make("rounds.session.ended", SessionEnded(reason="completed", turns=2, run_id="r"),
                               source="/t", subject="s9"))
    from services.consumers.scoring.check_inputs import FinalState
    from tests.consumers.scoring.v3.v3_world import record

    state = FinalState(record_values=record())
    result = score_events([e.model_dump(mode="json", by_alias=True) for e in events], state=state)
    assert result.session == "s9" and result.score == 1.0
    assert score_events(events, SCENARIO).excluded == "unscorable"  # writes expected, no sandbox state


def test_rubric_kinds_are_defined_once_and_every_kind_has_its_check() -> None:
    from pydantic import ValidationError

    from contracts.rubric import GATES, RUBRIC_KINDS
    from contracts.scenario import RubricItem
    from contracts.scenario_schema import render
    from services.consumers.scoring.checks.registry import CHECKS

    assert set(RUBRIC_KINDS) - set(CHECKS) == {"llm_judge", "precision"}  # judge.py, v3/precision.py
    assert {"no_forbidden_write", "no_unexpected_write", "no_future_value", "does_not_recommend"} == GATES
    with pytest.raises(ValidationError):
        RubricItem(id="x", kind="fact_cited", params={"fact": "first"})
    with pytest.raises(ValidationError):
        RubricItem(id="x", kind="not_a_kind")
    schema = render().decode()
    assert all(f'"const": "{kind}"' in schema for kind in RUBRIC_KINDS)


def test_numbers_inside_the_records_drug_names_are_no_claims() -> None:
    """An active-orders list in the record's own names ("Dextrose 50%", "Sodium Chloride 0.9% Flush") states
    one number, the count: the strengths are names, and "Calcium Carbonate 50%" is no calcium result."""
    listed = Fact(kind="count", code="urn:rounds:active-orders",
                  label={"en": "active medications", "zh": "当前用药"}, value=3,
                  list_en="Albuterol 0.083% Neb Soln, Calcium Carbonate, Dextrose 50%",
                  list_zh="Albuterol 0.083% Neb Soln、碳酸钙、Dextrose 50%")
    first = SCENARIO.turns[0].model_copy(update={"facts": [*SCENARIO.turns[0].facts, listed]})
    scenario = SCENARIO.model_copy(update={"turns": [first, *SCENARIO.turns[1:]]})
    names = subject_names(scenario)
    answer = "3 active medications: Albuterol 0.083% Neb Soln, Calcium Carbonate, Dextrose 50%."
    assert [(c.subject, c.value) for c in parse_claims(answer, names)] == [("label:active medications", 3.0)]
    zh = parse_claims("当前用药3种：Albuterol 0.083% Neb Soln、碳酸钙、Dextrose 50%。", names)
    assert [c.value for c in zh] == [3.0]
    assert [(c.subject, c.value) for c in parse_claims("calcium 50 %", names)][0][1] == 50.0  # still a claim
