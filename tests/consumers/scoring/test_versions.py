"""Scorer versions are modules of one shape behind one dispatcher, and a rubric kind no check judges is an
error, never an item dropped in silence."""

from __future__ import annotations

import inspect

import pytest

from contracts.rubric import RUBRIC_KINDS
from contracts.scenario import RubricItem
from services.consumers.scoring.check_inputs import CheckContext, FinalState
from services.consumers.scoring.checks.registry import CHECKS, JUDGED_ELSEWHERE, UnknownKind, check_of
from services.consumers.scoring.scorer import score_session
from services.consumers.scoring.turn_parts import check_item
from services.consumers.scoring.versions import CURRENT, VERSIONS, rules_of, score_turns_of
from tests.consumers.scoring.v3.v3_world import SCENARIO, log


def test_every_version_has_the_same_shape() -> None:
    shapes = {label: list(inspect.signature(fn).parameters) for label, fn in VERSIONS.items()}
    assert set(shapes) == {"2", "3", "4"} and CURRENT == "4"
    assert all(params == ["scenario", "log", "state", "language", "judge"] for params in shapes.values())
    assert score_turns_of("3.1") is VERSIONS["3"] and score_turns_of("4-rc") is VERSIONS["4"]
    assert score_turns_of(None) is VERSIONS[CURRENT] and rules_of("23") == CURRENT


def test_every_rubric_kind_is_judged_by_a_registered_check_or_elsewhere() -> None:
    assert {k for k, spec in RUBRIC_KINDS.items() if spec.check not in JUDGED_ELSEWHERE} == set(CHECKS)
    assert all(type(CHECKS[k]).__name__ == RUBRIC_KINDS[k].check for k in CHECKS)


def test_an_unknown_kind_is_an_error_and_the_session_unscorable() -> None:
    with pytest.raises(UnknownKind, match="no_such_kind"):
        check_of("no_such_kind")
    session, state = log()
    odd = RubricItem.model_construct(id="x", kind="no_such_kind", params={}, weight=1.0, safety=False,
                                     description=None)
    turn = SCENARIO.turns[0]
    ctx = CheckContext(SCENARIO, turn, session.turns[0], session, FinalState(), "en")
    with pytest.raises(UnknownKind):
        check_item(odd, ctx, None)
    broken = SCENARIO.model_copy(update={"turns": [turn.model_copy(update={"rubric": [*turn.rubric, odd]}),
                                                   *SCENARIO.turns[1:]]})
    for version in VERSIONS:
        score = score_session(session, broken, state, version=version)
        assert score.score is None and score.excluded == "unscorable" and "no_such_kind" in score.error
