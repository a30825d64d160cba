"""Downstream facts: scores (`rounds.score.*`), FHIR changes (`rounds.fhir.resource.*`), dead letters."""

from __future__ import annotations

import base64
import hashlib
from typing import ClassVar

from pydantic import Field

from events.bus import Record
from events.payloads.base import Payload

DEAD_LETTER_RAW_LIMIT = 96 * 1024  # base64 of this stays well inside the 256 KiB event limit

FHIR_ID = r"^[A-Za-z0-9\-.]{1,64}$"


class ScoreCheck(Payload):
    """One rubric item's verdict (the scenario's RubricItem id and kind)."""

    id: str = Field(min_length=1)
    kind: str = Field(min_length=1)
    passed: bool
    weight: float = 1.0
    safety: bool = False
    evidence: str | None = None


class _Scored(Payload):
    """What identifies a score: the run, the scorer's version, the scenario and trial it belongs to."""

    run_id: str | None = None
    scorer_version: str | None = None
    scenario: str | None = None
    trial: int | None = Field(default=None, ge=0)
    language: str | None = None
    variant: str | None = None


class ScoreTurn(_Scored):
    """One scorer's verdict on one physician turn: `message_id` is the assistant's answer (its
    Communication id), or the doctor's message when the turn got no answer."""

    TYPE: ClassVar[str] = "rounds.score.turn"

    scorer: str = Field(min_length=1)
    metric: str = Field(min_length=1)
    value: float
    message_id: str = Field(pattern=FHIR_ID)
    turn: int = Field(ge=0)
    rationale: str | None = None
    score: float | None = None
    task_type: str | None = None
    checks: list[ScoreCheck] | None = None


class JudgeCall(_Scored):
    """One call of the optional LLM judge (`rounds score --judge`): the model and prompt version it asked,
    the rubric item of which turn, its verdict and how long the call took. One event per call, so a run's
    judged figures (the report's `judge`, a suite's `judge_correctness`) are traceable to each call."""

    TYPE: ClassVar[str] = "rounds.score.judge"

    model: str = Field(min_length=1)
    prompt_version: str = Field(min_length=1)
    turn: int = Field(ge=0)
    item: str = Field(min_length=1)
    passed: bool
    reason: str | None = None
    latency_ms: float | None = Field(default=None, ge=0)


class ScoreSession(_Scored):
    """A scorer's summary of a whole session. `excluded` names why a session is not scored (its end reason
    `infrastructure_error` / `patient_error`, or `unscorable`): it is counted apart, never scored 0."""

    TYPE: ClassVar[str] = "rounds.score.session"

    scorer: str = Field(min_length=1)
    metrics: dict[str, float]
    passed: bool | None = None
    rationale: str | None = None
    score: float | None = None
    reason: str | None = None
    excluded: str | None = None
    turns: int | None = Field(default=None, ge=0)


SHARED_RECORD = ""
"""The session key of the shared record (the loaded data every session overlays): the `session` of its rows
in the FHIR store, the subject its change events go without. Every reader and writer compares with this."""


class FhirResourceChange(Payload):
    """Id-only notification of a FHIR write (like Azure's FHIR events): read the resource to see it."""

    resource_type: str = Field(pattern=r"^[A-Z][A-Za-z]{1,63}$")
    id: str = Field(pattern=FHIR_ID)
    version_id: str = Field(pattern=FHIR_ID)

    # One payload, three types: the change is in the type, not in the data (as in Azure's FHIR events).
    CREATED: ClassVar[str] = "rounds.fhir.resource.created"
    UPDATED: ClassVar[str] = "rounds.fhir.resource.updated"
    DELETED: ClassVar[str] = "rounds.fhir.resource.deleted"
    TYPES: ClassVar[dict[str, str]] = {"created": CREATED, "updated": UPDATED, "deleted": DELETED}


class FhirResourceKnown(Payload):
    """A resource became known to a session whose clock moved past the time it was known (`rounds feed`):
    id-only, like a change; read it on the session's base to see it."""

    TYPE: ClassVar[str] = "rounds.fhir.resource.known"

    resource_type: str = Field(pattern=r"^[A-Z][A-Za-z]{1,63}$")
    id: str = Field(pattern=FHIR_ID)
    version_id: str = Field(pattern=FHIR_ID)
    known_at: str = Field(description="the session's clock when it appeared (FHIR instant)")


class DeadLetter(Payload):
    """A record a consumer could not process, kept with the reason so it never blocks the stream."""

    TYPE: ClassVar[str] = "rounds.event.deadlettered"

    topic: str
    partition: int = Field(ge=0)
    offset: int = Field(ge=0)
    key: str
    group_id: str
    error: str = Field(max_length=8000)
    raw_base64: str = Field(
        description=f"the record's bytes as stored, base64 (first {DEAD_LETTER_RAW_LIMIT} bytes)"
    )
    raw_size: int = Field(ge=0)
    raw_digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    original_type: str | None = None

    @classmethod
    def of(cls, record: Record, group_id: str, error: str) -> DeadLetter:
        """The dead letter for `record`, which `group_id` failed to process with `error`."""
        return cls(
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            key=record.key,
            group_id=group_id,
            error=error[:8000],
            raw_base64=base64.b64encode(record.raw[:DEAD_LETTER_RAW_LIMIT]).decode(),
            raw_size=len(record.raw),
            raw_digest="sha256:" + hashlib.sha256(record.raw).hexdigest(),
            original_type=record.event.type if record.event is not None else None,
        )
