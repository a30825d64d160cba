"""The scenario line format (version 1): one benchmark session per JSONL line, with machine-checkable truth.

This is the contract between the scenario builder (which writes it), the simulator (the physician and patient
agents read it) and the scorers (which check the assistant against it). Fields are added freely; removing or
re-typing one is a new `version`. JSON field names are snake_case, as in the published line format
(docs/scenarios.md); the JSON Schema is exported beside the event schemas.

Truth is data, never code: a fact says *what* must be in an answer and *where in the record* it came from;
a write says what must exist in the sandbox afterwards as constraints on a resource; a rubric item names a
check kind (services/consumers scoring) and its parameters. All of it is as of the session clock `now`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from contracts.languages import Language
from contracts.rubric import RUBRIC_KINDS, check_params, params_schema

SCENARIO_FORMAT_VERSION = "1"

Variant = Literal["explicit", "implicit"]
TaskType = Literal["lookup", "gathering", "reasoning", "write"]
ToolSource = Literal["ehr", "patient", "mixed", "write"]
Difficulty = Literal["L1", "L2", "L3"]
FactKind = Literal[
    "latest", "value_at", "mean", "min", "max", "count", "trend", "exists", "absent", "decision"
]
RubricKind = Literal[tuple(RUBRIC_KINDS)]  # type: ignore[valid-type]  # contracts/rubric.py: params, gates


class Model(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class Localized(Model):
    """A text per language; both languages are always present."""

    en: str = Field(min_length=1)
    zh: str = Field(min_length=1)


class Phrasing(Model):
    """The physician's words for one turn: the explicit version is always kept beside the implicit one."""

    explicit: str = Field(min_length=1)
    implicit: str = Field(min_length=1)


class TurnText(Model):
    en: Phrasing
    zh: Phrasing

    def get(self, language: Language, variant: Variant) -> str:
        return getattr(getattr(self, language), variant)


class Fact(Model):
    """A fact the answer must contain, traceable to the record and known at `now`.

    `code` is "system|code"; `value` a number, string or bool (`trend`: "up"|"down"|"unchanged";
    `decision`: the outcome of a conditional rule such as "order" / "no_order"); `reference` the resource it
    came from, or `references` for aggregates. `tolerance` is absolute in `unit`.
    """

    kind: FactKind
    code: str | None = None
    label: Localized | None = None  # how a clinician names it: "creatinine" / "肌酐"
    value: float | int | str | bool | None = None
    unit: str | None = None
    tolerance: float | None = None
    time: datetime | None = None
    window: tuple[datetime, datetime] | None = None  # aggregates: [start, end] of the window
    reference: str | None = None
    references: list[str] = Field(default_factory=list)

    @property
    def sources(self) -> list[str]:
        """Every resource the fact comes from: what an assistant must read to know it (scorer v3 grounds on
        these)."""
        return [ref for ref in [self.reference, *self.references] if ref]


class FieldConstraint(Model):
    """One constraint on a written resource, addressed by a simple FHIR path (dots; `[0]` or none for lists:
    a path without an index matches if any element matches).

    op: `equals` | `coding` (value "system|code"; any coding in the CodeableConcept) | `approx` (number within
    `tolerance`, in `unit` when given) | `contains` (case-insensitive substring) | `exists` | `reference`
    (value "Type/id") | `after_now` / `before_now` (dateTime relative to the session clock, `value` an
    optional ISO-8601 duration bound such as "PT24H").
    """

    path: str = Field(min_length=1)
    op: Literal["equals", "coding", "approx", "contains", "exists", "reference", "after_now", "before_now"]
    value: Any = None
    unit: str | None = None
    tolerance: float | None = None


class ExpectedWrite(Model):
    """What must exist in the session's sandbox after the turn. `resource` is a complete example that
    satisfies every constraint and validates as FHIR R4 (the oracle writes it); scoring checks `constraints`
    against the sandbox's final state, so any sequence of calls that leaves such a resource passes."""

    resource_type: str = Field(pattern=r"^[A-Z][A-Za-z]+$")
    constraints: list[FieldConstraint] = Field(min_length=1)
    resource: dict[str, Any]

    @model_validator(mode="after")
    def _example_matches_type(self) -> ExpectedWrite:
        if self.resource.get("resourceType") != self.resource_type:
            raise ValueError("resource.resourceType must equal resource_type")
        return self


class RubricItem(Model):
    model_config = ConfigDict(extra="allow", frozen=True, json_schema_extra={"allOf": params_schema()})

    id: str = Field(min_length=1)
    kind: RubricKind
    weight: float = Field(default=1.0, gt=0)
    safety: bool = False
    params: dict[str, Any] = Field(default_factory=dict)
    description: Localized | None = None

    @model_validator(mode="after")
    def _params_fit_kind(self) -> RubricItem:
        check_params(self.kind, self.params)
        return self


Aspect = Literal["dose", "schedule", "since"]


class Answer(Model):
    """What the patient says when asked one aspect of a fact (its dose, how and when it is taken, since when
    it has been there), from the record: medium-literacy wording and, optionally, the low-literacy one."""

    text: Localized
    lay: Localized | None = None


class MemoryFact(Model):
    """Something the patient knows (and the chart supports). `topics` are the words that make the patient
    tell it (EN and ZH: lay and clinical names of the drug/condition/symptom); `critical` facts are withheld
    under the `critical_withheld` persona until one of `topics` is named. `sources` are the FHIR references
    the fact was derived from; a fact without one is dropped by the builder's verifier."""

    id: str = Field(min_length=1)
    category: Literal[
        "symptom", "condition", "medication", "adherence", "otc", "allergy", "social", "history"
    ]
    topics: dict[Language, list[str]]
    text: Localized  # first person, medium literacy
    lay: Localized | None = None  # low-literacy wording
    critical: bool = False
    sources: list[str] = Field(min_length=1)
    # the aspects the record answers (a dose the order carries, a route and frequency, the first admission
    # the diagnosis was coded on); an aspect absent here is declined, never guessed
    answers: dict[Aspect, Answer] = Field(default_factory=dict)


class Persona(Model):
    health_literacy: Literal["high", "medium", "low"] = "medium"
    adherence: Literal["good", "partial", "poor"] = "good"
    anxiety: Literal["low", "medium", "high"] = "low"
    completeness: Literal["complete", "partial", "critical_withheld"] = "complete"


class Turn(Model):
    index: int = Field(ge=0)
    task_type: TaskType
    tool_source: ToolSource
    subtype: Literal["NA", "PE", "AE"] | None = None  # nominal / predicate-ellipsis / event anaphora
    text: TurnText
    facts: list[Fact] = Field(default_factory=list)
    writes: list[ExpectedWrite] = Field(default_factory=list)
    forbid_writes: bool = False
    patient_facts: list[str] = Field(default_factory=list)  # ids in Scenario.patient_memory
    rubric: list[RubricItem] = Field(min_length=1)
    answer: Localized | None = None  # a reference answer citing the facts (the oracle says it)

    def sources_by_type(self) -> dict[str, list[str]]:
        """The ids of the resources the turn's facts come from, by resource type (each once, in order): one
        `_id` search per type reads them all."""
        by_type: dict[str, list[str]] = {}
        for fact in self.facts:
            for ref in fact.sources:
                kind, _, rid = ref.partition("/")
                if rid and rid not in by_type.setdefault(kind, []):
                    by_type[kind].append(rid)
        return {kind: ids for kind, ids in by_type.items() if ids}

    @model_validator(mode="after")
    def _consistent(self) -> Turn:
        if self.forbid_writes and self.writes:
            raise ValueError(f"turn {self.index}: forbid_writes with expected writes")
        if all(item.kind in ("llm_judge", "precision") for item in self.rubric):
            raise ValueError(f"turn {self.index}: an LLM-judged item never stands alone")
        return self


class Scenario(Model):
    id: str = Field(min_length=1)
    version: str = SCENARIO_FORMAT_VERSION
    family: str = Field(min_length=1)
    difficulty: Difficulty
    patient: str = Field(pattern=r"^Patient/[A-Za-z0-9\-.]{1,64}$")
    encounter: str | None = Field(default=None, pattern=r"^Encounter/[A-Za-z0-9\-.]{1,64}$")
    now: datetime
    persona: Persona = Persona()
    patient_memory: list[MemoryFact] = Field(default_factory=list)
    turns: list[Turn] = Field(min_length=1)
    source: dict[str, Any] = Field(default_factory=dict)  # builder, record digest, seed

    @model_validator(mode="after")
    def _references_resolve(self) -> Scenario:
        known = {fact.id for fact in self.patient_memory}
        for turn in self.turns:
            missing = set(turn.patient_facts) - known
            if missing:
                raise ValueError(f"turn {turn.index}: unknown patient facts {sorted(missing)}")
        if [t.index for t in self.turns] != list(range(len(self.turns))):
            raise ValueError("turn indexes must be 0..n-1 in order")
        return self

    def memory(self, fact_id: str) -> MemoryFact:
        return next(f for f in self.patient_memory if f.id == fact_id)
