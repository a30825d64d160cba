"""Session lifecycle payloads: `rounds.session.started` / `rounds.session.ended`."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Literal

from pydantic import Field

from events.payloads.base import Payload


class SessionStarted(Payload):
    """A simulated encounter begins. The patient is a FHIR reference into the session's sandbox.

    A simulator run also records what is needed to score, re-score and replay the session from the log
    alone: the run, the scenario (its id, the digest of its line and the line itself), the trial, the
    language and variant the physician speaks, and the seed.
    """

    TYPE: ClassVar[str] = "rounds.session.started"

    assistant: str = Field(min_length=1, description="assistant under test (its spec, e.g. openai:gpt-x)")
    patient: str | None = Field(default=None, pattern=r"^Patient/[A-Za-z0-9.-]{1,64}$")
    encounter: str | None = Field(default=None, pattern=r"^Encounter/[A-Za-z0-9.-]{1,64}$")
    scenario: str | None = None
    as_of: datetime | None = Field(
        default=None, description="the sandbox clock: the EHR as it was at this instant"
    )
    fhir_base: str | None = Field(default=None, description="base URL the assistant uses for this session")
    seed: int | None = None
    run_id: str | None = None
    trial: int | None = Field(default=None, ge=0)
    language: Literal["en", "zh"] | None = None
    variant: Literal["explicit", "implicit"] | None = None
    scenario_digest: str | None = Field(default=None, pattern=r"^sha256:[0-9a-f]{64}$")
    scenario_definition: dict[str, Any] | None = Field(
        default=None, description="the scenario line itself (contracts/scenario.py)"
    )
    replay_of: str | None = Field(default=None, description="run id this run replays (counterfactual replay)")
    run_options: dict[str, Any] | None = Field(
        default=None, description="what the run was asked to do (assistant limits, steps, timeouts, seed): a "
        "rerun of the run id is held to them"
    )
    retry_of: str | None = Field(
        default=None, description="the session of the same job, earlier in the run, that this one reruns "
        "(it ended in timeout, infrastructure_error or interrupted)"
    )


EndReason = Literal[
    "completed", "max_steps", "timeout", "assistant_error", "infrastructure_error", "patient_error",
    "interrupted",
]
END_REASONS: tuple[str, ...] = EndReason.__args__


class SessionEndedV1(Payload):
    """Schema v1 (before the simulator): four coarse reasons."""

    TYPE: ClassVar[str] = "rounds.session.ended"

    reason: Literal["completed", "aborted", "timeout", "error"]
    turns: int = Field(ge=0)
    duration_ms: float | None = Field(default=None, ge=0)
    error: str | None = None


class SessionEnded(Payload):
    """A simulated encounter is over. `reason` says who, if anyone, is at fault: `assistant_error`,
    `max_steps` and `timeout` are the assistant's; `infrastructure_error` (Rounds or the network),
    `patient_error` (the simulated patient) and `interrupted` (the run was stopped, e.g. Ctrl-C) are never
    charged to it. `turns` counts completed physician turns.
    """

    TYPE: ClassVar[str] = "rounds.session.ended"

    reason: EndReason
    turns: int = Field(ge=0)
    duration_ms: float | None = Field(default=None, ge=0)
    error: str | None = None
    run_id: str | None = None


_V1_REASON = {
    "completed": "completed",
    "timeout": "timeout",
    "aborted": "infrastructure_error",
    "error": "infrastructure_error",
}


def session_ended_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """v1 -> v2: `aborted` and the unattributed `error` were never the assistant's fault as far as v1 knew."""
    return {**data, "reason": _V1_REASON[data["reason"]]}
