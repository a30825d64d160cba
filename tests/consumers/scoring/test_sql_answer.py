"""The deterministic answer check of question-answering suites (checks/sql_answer.py): every gold shape of a
SQL result, what a clinician or an agent writes for it, and what merely contains it."""

from __future__ import annotations

import pytest

from services.consumers.scoring.checks.sql_answer import gold_of, judge_answer

QUESTION = "How frequently was milk of magnesia prescribed to patient 10005348 in 09/this year?"

ACCEPTED = [
    ([[1]], True, "Yes, the patient underwent the procedure."),
    ([[1]], True, "Yes."),
    ([[0]], True, "No, it was not performed."),
    ([[0]], True, "The patient did not undergo it."),
    ([[0]], True, "There is no record of that procedure in the chart."),
    ([[1]], False, "It was prescribed 1 time in September 2128."),
    ([[1]], False, "Once."),
    ([[2]], False, "twice"),
    ([[0]], False, "It was never prescribed."),
    ([[0]], False, "0 times"),
    ([[2.48891204]], False, "The difference is 2.49."),
    ([[2.48891204]], False, "2.4889 days"),
    ([[7515]], False, "7,515 mL"),
    ([[331.0]], False, "331"),
    ([[-0.3]], False, "It decreased by 0.3."),
    ([["400"]], False, "400 mg of ibuprofen"),
    ([["2155-12-03 14:00:00"]], False, "It was on 2155-12-03 at 14:00."),
    ([["2155-12-03 14:00:00"]], False, "2155-12-03T14:00:00-05:00"),
    ([["2155-12-03 14:00:00"]], False, "2155-12-03T19:00:00Z"),
    ([["2155-12-03 14:00:00"]], False, "Dec 3, 2155 at 2:00 pm"),
    ([["2155-12-03 14:00:17"]], False, "2155-12-03 14:00:17"),
    ([["2155-12-03 00:00:00"]], False, "On 2155-12-03."),
    ([], False, "There is no record of that."),
    ([[None]], False, "None found."),
    ([[None]], False, "No output was recorded on that day."),
    ([["M"]], False, "The patient is male."),
    ([["M"]], False, "M"),
    ([["EW EMER."]], False, "It was an emergency admission (EW EMER.)."),
    ([["MRSA SCREEN"]], False, "The specimen was an MRSA screen."),
    ([["OxycoDONE (Immediate Release) "]], False, "oxycodone (immediate release)"),
    ([["Sodium Chloride 0.9%  Flush"]], False, "Sodium chloride 0.9% flush"),
    ([["Lorazepam"], ["Ibuprofen"]], False, "Ibuprofen and lorazepam."),
    ([["2178-07-03 21:13:00"], ["2178-07-13 05:40:00"]], False, "2178-07-13 05:40 and 2178-07-03 21:13"),
    ([["100"], ["100"]], False, "100 mL"),
]

REFUSED = [
    ([[1]], True, "No record of that procedure.", "verdict no; expected yes"),
    ([[1]], True, "", "no answer"),
    ([[0]], True, "Yes, it was performed.", "verdict yes; expected no"),
    ([[1]], False, "It was prescribed 2 times.", "not stated: 1"),
    ([[2.48891204]], False, "2", "not stated"),  # one significant digit is no rounding of 2.49
    ([[2.48891204]], False, "Values: 2.49, 3.1, 4.0", "a list of candidates: also 3.1, 4.0"),
    ([[-0.3]], False, "It was 0.3.", "not stated"),
    ([["2155-12-03 14:00:00"]], False, "2155-12-03 15:00", "not stated"),
    ([["2155-12-03 14:00:00"]], False, "2155-12-03T14:00:00Z", "not stated"),  # 14:00 UTC is 09:00 there
    ([["2155-12-03 14:00:00"]], False, "On 2155-12-03.", "not stated"),  # the time is part of the answer
    ([["2155-12-03 14:00:00"]], False, "2155-12-03 14:00 or 2155-12-04 10:00", "a list of candidates"),
    ([], False, "The value was 7.2.", "expected no result"),
    ([[None]], False, "The total was 350 mL.", "expected no result"),
    ([["M"]], False, "female", "not stated: M"),
    ([["MRSA SCREEN"]], False, "MRSA SCREEN, BLOOD CULTURE, URINE CULTURE", "a list of candidates"),
    ([["Lorazepam"], ["Ibuprofen"]], False, "Ibuprofen.", "not stated: Lorazepam"),
    ([["Lorazepam"]], False, "Lorazepam, haloperidol or morphine", "a list of candidates"),
]


@pytest.mark.parametrize(("rows", "boolean", "answer"), ACCEPTED)
def test_what_a_clinician_writes_for_the_gold_is_accepted(rows, boolean: bool, answer: str) -> None:
    passed, evidence = judge_answer(answer, gold_of(rows, boolean), QUESTION)
    assert passed, evidence


@pytest.mark.parametrize(("rows", "boolean", "answer", "why"), REFUSED)
def test_a_wrong_answer_or_a_list_of_candidates_fails(rows, boolean: bool, answer: str, why: str) -> None:
    passed, evidence = judge_answer(answer, gold_of(rows, boolean), QUESTION)
    assert not passed and why in evidence, evidence


def test_the_question_s_own_numbers_are_no_candidates() -> None:
    # the patient id and the month come from the question, not the answer's own candidates
    passed, _ = judge_answer("Patient 10005348 received it 1 time in 09.", gold_of([[1]], False), QUESTION)
    assert passed


def test_gold_shapes() -> None:
    assert gold_of([], False).shape == "none"
    assert gold_of([[None]], False).shape == "none"
    assert (gold_of([[1]], True).shape, gold_of([[1]], True).verdict) == ("yes_no", "yes")
    assert gold_of([[1]], False).values[0].kind == "number"  # a count of 1, not a yes
    assert [v.kind for v in gold_of([["400"], ["2150-01-01 01:00:00"], ["Bag"]], False).values] == [
        "number", "time", "text"]
    assert len(gold_of([["100"], ["100"]], False).values) == 1
