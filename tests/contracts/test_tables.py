"""The contracts' tables agree with what the rest of the house records and runs: every recorded end reason
says who is at fault, every rubric kind names a check the scorer has, and the language set is the one the
session events record."""

from __future__ import annotations

from typing import get_args

from contracts.end_reasons import END_OF_SESSION, NOT_ASSISTANT_FAULT, RESUMED, RETRIED
from contracts.languages import LANGUAGE_CHOICES, LANGUAGES
from contracts.rubric import RUBRIC_KINDS
from events.payloads.session import END_REASONS, SessionStarted
from services.consumers.scoring.checks.registry import CHECKS
from services.consumers.scoring.judge import LlmJudge
from services.consumers.scoring.v3.precision import Precision


def test_every_recorded_end_reason_has_its_fault() -> None:
    assert set(END_OF_SESSION) == set(END_REASONS)
    assert {"infrastructure_error", "patient_error", "interrupted"} == NOT_ASSISTANT_FAULT
    assert all(END_OF_SESSION[r].fault != "assistant" for r in NOT_ASSISTANT_FAULT)
    assert RESUMED <= RETRIED and "timeout" in RETRIED and "assistant_error" not in RETRIED


def test_every_rubric_kind_names_a_check_of_the_scorer() -> None:
    judged_apart = {LlmJudge.__name__, Precision.__name__}
    assert {kind: type(check).__name__ for kind, check in CHECKS.items()} == {
        kind: spec.check for kind, spec in RUBRIC_KINDS.items() if spec.check not in judged_apart}
    assert {spec.check for spec in RUBRIC_KINDS.values()} >= judged_apart


def test_the_language_set_is_the_recorded_one() -> None:
    field = SessionStarted.model_fields["language"].annotation
    recorded = {lang for literal in get_args(field) for lang in get_args(literal)}
    assert recorded == set(LANGUAGES)
    assert LANGUAGE_CHOICES["both"] == LANGUAGES
    assert all(LANGUAGE_CHOICES[lang] == (lang,) for lang in LANGUAGES)
