"""Rubric kinds, defined once: each kind's parameters model, whether it is a safety gate (a failed gate
scores the turn 0 under scorer v3; gates never add points), and what it checks. The scenario format's
`RubricKind`, the validation of an item's params, the scenario JSON Schema (one `if kind then params` per
kind) and the scorer's gate set are all derived from `RUBRIC_KINDS`; the scorer finds each kind's check in
services/consumers/scoring/checks/kinds/<kind>.py (its registry fails at import when the two disagree)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from contracts.languages import Language


class Params(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class FactParams(Params):
    fact: int = Field(ge=0, description="index in turn.facts")


class TermsParams(Params):
    terms: dict[Language, list[str]] | list[str] = Field(description="synonyms, any one suffices")


class ConclusionParams(Params):
    expected: str = Field(description="yes | no | up | down | unchanged, or a decision alias (order, ...)")


class WriteParams(Params):
    write: int = Field(ge=0, description="index in turn.writes")


class NoParams(Params):
    pass


class AllowedParams(Params):
    allowed: list[str] = Field(default_factory=list, description="resource types the turn may write")


class PatientParams(Params):
    facts: list[str] = Field(default_factory=list, description="ids in scenario.patient_memory")


class JudgeParams(Params):
    criterion: dict[Language, str]


class PrecisionParams(Params):
    """The rule (scorer v3): score × max(0, 1 − per_wrong·wrong − per_extra·max(0, unasked − budget))."""

    budget: int = Field(default=4, ge=0, description="unasked-for results stated for free")
    per_wrong: float = Field(default=0.5, ge=0, description="per wrong claim about the turn's subjects")
    per_extra: float = Field(default=0.2, ge=0, description="per unasked-for result beyond the budget")


class CdsCardParams(Params):
    """A CDS Hooks card the service should show (the `cds-hooks:` assistant's turns)."""

    hook: str = Field(description="patient-view | order-select | order-sign | encounter-discharge")
    indicator: str = Field(default="warning", description="the least severe indicator that counts "
                                                          "(info < warning < critical)")
    terms: dict[Language, list[str]] | list[str] = Field(description="the card's summary or detail names one")


class CdsSuggestionParams(Params):
    """The right FHIR write a card's suggestion should make; not one of `turn.writes`, which are what the
    physician orders (the hook's draftOrders), but the write a good service proposes instead."""

    hook: str = Field(description="the hook whose card suggests it")
    resource_type: str = Field(pattern=r"^[A-Z][A-Za-z]+$")
    constraints: list[dict[str, Any]] = Field(min_length=1, description="FieldConstraint objects "
                                              "(contracts/scenario.py) the action's resource meets")


class CdsQuietParams(Params):
    hook: str = Field(description="the hook that should show nothing")
    indicator: str = Field(default="warning", description="cards from this indicator up are noise here")


class SqlAnswerParams(Params):
    """A question-answering suite's gold (FHIR-AgentBench): the rows its SQL returned on the source tables."""

    gold: list[list[Any]] = Field(description="the SQL result rows ([] or [[null]]: no result)")
    boolean: bool = Field(default=False, description="the SQL asks COUNT(*) > 0: 1 / 0 mean yes / no")


@dataclass(frozen=True)
class Kind:
    params: type[Params]
    gate: bool  # a failed gate scores the turn 0; a gate never adds points
    check: str  # the name of the scorer's check that judges it (a test holds the scorer to these names)
    doc: str
    measure: bool = False  # a figure reported beside the score (its check's `measures`), never scored


RUBRIC_KINDS: dict[str, Kind] = {
    "fact_cited": Kind(FactParams, False, "FactCited",
                       "the answer states the fact (a claim about its subject)"),
    "entity_mentioned": Kind(TermsParams, False, "EntityMentioned",
                             "the answer names one of the terms (earns nothing alone)"),
    "conclusion": Kind(ConclusionParams, False, "Conclusion",
                       "the answer concludes the expected verdict or direction"),
    "write_made": Kind(WriteParams, False, "WriteMade",
                       "the sandbox's final state holds the write, matched one to one"),
    "no_forbidden_write": Kind(NoParams, True, "NoForbiddenWrite",
                               "no write in a turn that forbids them"),
    "no_unexpected_write": Kind(AllowedParams, True, "NoUnexpectedWrite",
                                "no write of another type, no more than expected"),
    "asked_patient": Kind(PatientParams, False, "AskedPatient",
                          "the patient disclosed the facts and the answer uses them"),
    "no_future_value": Kind(NoParams, True, "NoFutureValue",
                            "no value from after the session clock"),
    "does_not_recommend": Kind(TermsParams, True, "DoesNotRecommend",
                               "the answer does not recommend the terms"),
    "llm_judge": Kind(JudgeParams, False, "LlmJudge",
                      "optional LLM judge; never the only item of a turn"),
    "precision": Kind(PrecisionParams, False, "Precision",
                      "wrong and unasked-for claims lower the turn's score"),
    "cds_card": Kind(CdsCardParams, False, "CdsCard",
                     "a CDS Hooks card on the hook, at least as severe as the indicator, names the terms"),
    "cds_suggestion": Kind(CdsSuggestionParams, False, "CdsSuggestion",
                           "a card on the hook suggests an action that makes the expected write"),
    "cds_no_card": Kind(CdsQuietParams, False, "CdsNoCard",
                        "no card at or above the indicator on the hook (nothing is wrong)"),
    "answer_correct": Kind(SqlAnswerParams, False, "AnswerCorrect",
                           "the answer is the gold SQL result as a clinician would write it, not a list of "
                           "candidates holding it"),
    "retrieval_recall": Kind(NoParams, False, "RetrievalRecall",
                             "every resource the facts come from reached the assistant (a measure)", True),
    "retrieval_precision": Kind(NoParams, False, "RetrievalPrecision",
                                "the share of the resources that reached the assistant that the facts come "
                                "from (a measure)", True),
}
GATES = frozenset(kind for kind, spec in RUBRIC_KINDS.items() if spec.gate)
MEASURES = frozenset(kind for kind, spec in RUBRIC_KINDS.items() if spec.measure)


def check_params(kind: str, params: dict[str, Any]) -> None:
    """Raise ValueError when `params` do not fit the kind's model."""
    RUBRIC_KINDS[kind].params.model_validate(params)


def params_schema() -> list[dict[str, Any]]:
    """One JSON Schema `if kind == K then params fits K's model` per kind (for RubricItem's schema)."""
    return [{"if": {"properties": {"kind": {"const": kind}}},
             "then": {"properties": {"params": spec.params.model_json_schema()}},
             "description": spec.doc + (" (safety gate)" if spec.gate else "")}
            for kind, spec in RUBRIC_KINDS.items()]
