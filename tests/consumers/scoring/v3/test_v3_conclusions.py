"""Scorer v3's conclusions as claims: a direction or a verdict attributed to a subject (EN and ZH), and the
conclusion checks that judge them by subject — the world scenario's turn 1 asks whether the creatinine is
getting worse (trend "up"), scored end to end; a decision turn is judged on its own."""

from __future__ import annotations

import pytest

from contracts.scenario import Fact
from contracts.vocabulary import lab_code
from services.consumers.scoring.scorer import score_session
from services.consumers.scoring.v3.claims import parse_answer
from services.consumers.scoring.v3.conclusions import asked, judge, verdict_alias
from services.consumers.scoring.v3.subjects import subject_names
from tests.consumers.scoring.v3.v3_world import LAB, SCENARIO, log

CR, K, MG = f"{LAB}|50912", lab_code("potassium"), lab_code("magnesium")
NAMES = subject_names(SCENARIO)
TREND_QUESTION = "Over the last 72 hours, is the creatinine going up, going down or stable?"


def claims(answer: str, question: str = "") -> list[tuple[str | None, str]]:
    return [(c.subject, c.label) for c in parse_answer(answer, NAMES, question).conclusions]


@pytest.mark.parametrize("answer, expected", [
    ("Creatinine is rising; potassium is stable.", [(CR, "up"), (K, "unchanged")]),
    ("Creatinine is rising, potassium stable.", [(CR, "up"), (K, "unchanged")]),  # one clause, two parts
    ("Potassium 4.1 mEq/L, rising creatinine.", [(CR, "up")]),  # the name right after the cue
    ("Increasing: the potassium went from 3.9 to 5 mEq/L.", [(K, "up")]),  # else the first name after it
    ("Rising overall.", [(None, "up")]),  # a clause that names no subject
    ("肌酐在升高；血钾稳定。", [(CR, "up"), (K, "unchanged")]),
    ("肌酐在升高，血钾稳定。", [(CR, "up"), (K, "unchanged")]),
    ("血钾在下降：过去72小时从3.9到3.1。", [(K, "down")]),
])
def test_directions_are_claims_about_the_subject_their_clause_names(answer: str, expected: list) -> None:
    assert claims(answer) == expected


def test_verdicts_are_claims_and_a_negated_yes_is_a_no() -> None:
    assert claims("Yes, ordered potassium chloride 20 mEq by mouth.") == [("drug:potassium_chloride", "yes"),
                                                                          ("drug:potassium_chloride", "yes")]
    assert claims("No: the potassium is 4.0 mEq/L.") == [(K, "no")]
    assert claims("Potassium replacement is not needed.") == [(K, "no")]  # "needed" negated
    assert claims("血钾不需要补。") == [(K, "no")]
    assert claims("Potassium is not rising.") == []  # other negated cues say nothing
    assert claims("血钾没有升高。") == []


def test_hedged_and_echoed_cues_are_no_claims() -> None:
    assert claims("Creatinine may be rising; potassium might be stable.") == []
    assert claims("肌酐可能升高。") == []
    assert claims("Over the last 72 hours, is the creatinine going up, going down or stable?") == []
    echo = "Over the last 72 hours the creatinine is going up, going down or stable"
    assert claims(echo, TREND_QUESTION) == []  # the question's own words, copied without its "?"
    assert claims("Looking at it: is the creatinine going up? Yes, the creatinine is rising.",
                  TREND_QUESTION) == [(CR, "yes"), (CR, "up")]
    assert claims("肌酐是在升高、下降还是稳定", "过去72小时肌酐是在升高、下降还是稳定？") == []


def check(answer: str, language: str = "en", item: str = "t1-trend"):
    session, state = log({1: answer}, language=language)
    scored = score_session(session, SCENARIO, state, version="3")
    return next(c for c in scored.turns[1].checks if c.id == item)


@pytest.mark.parametrize("answer, language", [
    ("Creatinine is rising; potassium is stable.", "en"),  # another subject's direction is beside the point
    ("Potassium is stable, rising creatinine.", "en"),
    ("It is rising: 1.1 then 1.8 mg/dL.", "en"),  # the turn asks one subject: an unnamed claim is about it
    ("肌酐在升高；血钾稳定。", "zh"),
    ("在升高：从1.1到1.8。", "zh"),
])
def test_a_direction_about_the_asked_subject_passes(answer: str, language: str) -> None:
    for item in ("t1-trend", "t1-fact"):  # the conclusion item and the trend fact cited
        result = check(answer, language, item)
        assert result.passed, (item, result.evidence)


@pytest.mark.parametrize("answer, language, why", [
    ("Potassium is rising; creatinine is stable.", "en", "no up conclusion"),
    ("Potassium is rising.", "en", "about other subjects: up"),
    ("Rising potassium.", "en", "no up conclusion"),
    ("Creatinine is rising; creatinine is stable.", "en", "conflicting"),
    ("Creatinine is rising; it is stable overall.", "en", "conflicting"),  # the unnamed claim is about it
    ("Creatinine is not rising.", "en", "no up conclusion"),
    ("Creatinine may be rising.", "en", "no up conclusion"),
    ("血钾在升高。", "zh", "no up conclusion"),
    ("肌酐在升高；肌酐稳定。", "zh", "conflicting"),
    ("肌酐可能升高。", "zh", "no up conclusion"),
    ("肌酐没有升高。", "zh", "no up conclusion"),
])
def test_a_direction_about_another_subject_or_a_conflict_fails(answer: str, language: str, why: str) -> None:
    for item in ("t1-trend", "t1-fact"):
        result = check(answer, language, item)
        assert not result.passed and why in result.evidence, (item, result.evidence)


def test_two_trends_in_one_turn_need_the_subject_named() -> None:
    potassium = Fact(kind="trend", code=K, label={"en": "potassium", "zh": "血钾"}, value="unchanged")
    turn = SCENARIO.turns[1].model_copy(update={"facts": [*SCENARIO.turns[1].facts, potassium]})
    named = parse_answer("Creatinine is rising; potassium is stable.", NAMES, "").conclusions
    assert judge(named, asked("up", turn, "", NAMES))[0]
    assert judge(named, asked("unchanged", turn, "", NAMES))[0]
    unnamed = parse_answer("It is rising.", NAMES, "").conclusions
    assert not judge(unnamed, asked("up", turn, "", NAMES))[0]  # which one is rising?


DECISION_QUESTION = "Is this potassium low enough to need replacement (below 3.5 mEq/L)?"


def decision_turn(outcome: str):
    latest = Fact(kind="latest", code=K, label={"en": "potassium", "zh": "血钾"}, value=3.2, unit="mEq/L")
    rule = Fact(kind="decision", code="urn:rounds:rule|potassium_replacement",
                label={"en": "potassium replacement", "zh": "补钾"}, value=outcome)
    return SCENARIO.turns[1].model_copy(update={"facts": [latest, rule], "rubric": []})


def verdict(answer: str, outcome: str = "order", question: str = DECISION_QUESTION) -> tuple[bool, str]:
    expected = verdict_alias(outcome)
    assert expected is not None
    found = parse_answer(answer, NAMES, question).conclusions
    return judge(found, asked(expected, decision_turn(outcome), question, NAMES))


@pytest.mark.parametrize("answer, outcome", [
    ("Yes, replacement is indicated: the potassium is 3.2 mEq/L.", "order"),
    ("Yes, ordered potassium chloride 30 mEq by mouth.", "order"),  # a verdict on the drug it orders
    ("Yes.", "order"),
    ("Magnesium: no. Potassium: yes, replace it.", "order"),  # magnesium's verdict is not this decision's
    ("No: the potassium is 4.0 mEq/L, so no replacement.", "no_order"),
    ("Potassium replacement is not needed.", "no_order"),
    ("需要补钾：血钾3.2 mEq/L。", "order"),
    ("血镁不需要补；血钾需要补。", "order"),
    ("不需要：血钾4.0 mEq/L。", "no_order"),
])
def test_a_decision_passes_on_its_verdict_about_its_subject(answer: str, outcome: str) -> None:
    passed, evidence = verdict(answer, outcome)
    assert passed, evidence


@pytest.mark.parametrize("answer, outcome", [
    ("Potassium replacement, per protocol.", "order"),  # the rule's label is no verdict
    ("Magnesium: yes. Potassium: no.", "order"),  # the yes is about another result
    ("Magnesium needs replacing: yes.", "order"),
    ("Yes for the potassium, no for the potassium.", "order"),  # conflicting verdicts on one subject
    ("Replacement is not needed.", "order"),  # a negated yes is a no
    ("It may be needed.", "order"),  # hedged
    ("Is this potassium low enough to need replacement", "order"),  # the question echoed
    ("血镁需要补。", "order"),
    ("血钾可能需要补。", "order"),
    ("血钾需要补，血钾不需要补。", "order"),
])
def test_a_decision_fails_without_its_verdict_about_its_subject(answer: str, outcome: str) -> None:
    passed, evidence = verdict(answer, outcome)
    assert not passed, evidence


def test_a_turn_that_names_no_result_reads_verdicts_about_any() -> None:
    """"If it's out of date, reorder it.": no fact of the turn and no word of the message names the HbA1c."""
    turn = SCENARIO.turns[1].model_copy(update={"facts": [], "rubric": []})
    found = parse_answer("Yes, ordered a new hemoglobin A1c.", NAMES, "If it's out of date, reorder it.")
    assert judge(found.conclusions, asked("yes", turn, "If it's out of date, reorder it.", NAMES))[0]
