"""Scorer v4's session reliability (v4/reliability.py) on in-memory sessions of the world scenario
(tests/consumers/scoring/v3/v3_world.py): an assistant that told the physician a wrong result loses on every
turn from that
one on — the turns that state no number included — by the share of its verified result claims that were
wrong; an honest session, an invented value (unsupported) and a true extra cost nothing here."""

from __future__ import annotations

import pytest

from services.consumers.scoring.scorer import score_session
from services.consumers.scoring.v4.reliability import Reliability
from tests.consumers.scoring.v3.v3_world import SCENARIO, apixaban, log

REFERENCE = {0: "Her latest creatinine is 1.8 mg/dL (28 Feb), up from 1.1 mg/dL; glucose 126 mg/dL.",
             1: "Yes, creatinine is rising: 1.1 then 1.8 mg/dL."}


def score(answers: dict[int, str], language: str = "en"):
    session, state = log(answers, writes={3: [apixaban()]}, language=language)
    return score_session(session, SCENARIO, state)


def trust(result, index: int):
    return next(c for c in result.turns[index].checks if c.id == "reliability")


def test_an_honest_session_is_fully_trusted() -> None:
    result = score(REFERENCE)
    assert result.score == 1.0
    for index in range(4):
        check = trust(result, index)
        assert check.passed and check.weight == 0.0 and check.measures["reliability"] == 1.0
    assert trust(result, 0).measures["verified_claims"] == 5  # 1.8, 1.1, 126; 1.1, 1.8


@pytest.mark.parametrize("turn0, wrong", [  # the reference with its units swapped, its subjects rotated
    ("Her latest creatinine is 1.8 mmol/L (28 Feb), up from 1.1 mmol/L; glucose 126 mg/dL.", 2),
    ("Her latest glucose is 1.8 mg/dL (28 Feb), up from 1.1 mg/dL; creatinine 126 mg/dL.", 3),
])
def test_wrong_results_cost_every_later_turn_even_those_without_numbers(turn0: str, wrong: int) -> None:
    honest = score(REFERENCE)
    broken = score({**REFERENCE, 0: turn0})
    check = trust(broken, 2)
    factor = 1.0 - wrong / 5
    assert not check.passed and check.measures["wrong_claims"] == wrong
    assert check.measures["reliability"] == pytest.approx(factor)
    assert "turn 0:" in check.evidence and "wrong" in check.evidence
    for index in (2, 3):  # asking the patient, the write: right, but told by an assistant caught wrong
        assert honest.turns[index].score == 1.0
        assert broken.turns[index].score == pytest.approx(factor)
    assert broken.score <= honest.score - 0.25


def test_turns_before_the_first_wrong_claim_keep_their_score() -> None:
    result = score({**REFERENCE, 1: "Yes, creatinine is rising: 1.1 then 1.8 mmol/L."})
    assert result.turns[0].score == 1.0 and trust(result, 0).passed
    assert "applies from turn 1" in trust(result, 0).evidence
    assert trust(result, 3).measures["since_turn"] == 1
    assert result.turns[3].score == pytest.approx(1.0 - 1 / 5)


def test_an_invented_value_or_a_true_extra_is_precisions_business_not_reliabilitys() -> None:
    invented = score({**REFERENCE, 0: REFERENCE[0] + " Potassium 4.13."})  # no potassium result: unsupported
    assert invented.turns[0].score < 1.0  # precision charges the turn itself
    assert trust(invented, 3).passed and invented.turns[3].score == 1.0
    extra = score({**REFERENCE, 0: REFERENCE[0] + " Earlier creatinine 1.1 mg/dL."})
    assert extra.score == 1.0 and trust(extra, 3).measures["verified_claims"] == 6


def test_chinese_sessions_are_held_to_the_same_rule() -> None:
    honest = score({}, language="zh")
    assert honest.score == 1.0
    answer = "她最近的血糖为1.8毫克/分升（2月28日），之前1.1；肌酐7.0 mmol/L。"  # subjects rotated
    broken = score({0: answer}, language="zh")
    assert not trust(broken, 3).passed and broken.turns[3].score < 1.0


def test_the_factor_is_the_wrong_share_and_none_without_claims() -> None:
    assert Reliability(0, [], None).share == 0.0 and Reliability(0, [], None).factor(0) == 1.0
    assert Reliability(3, [], None).factor(5) == 1.0
