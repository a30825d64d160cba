"""Session lifecycle payloads: `rounds.session.started` / `rounds.session.ended`."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from events.payloads.base import Payload


class SessionStarted(Payload):
    """A simulated encounter begins. The patient is a FHIR reference into the session's sandbox."""

    assistant: str = Field(min_length=1, description="assistant under test (model or endpoint name)")
    patient: str | None = Field(default=None, pattern=r"^Patient/[A-Za-z0-9.-]{1,64}$")
    encounter: str | None = Field(default=None, pattern=r"^Encounter/[A-Za-z0-9.-]{1,64}$")
    scenario: str | None = None
    as_of: datetime | None = Field(
        default=None, description="the sandbox clock: the EHR as it was at this instant"
    )
    fhir_base: str | None = Field(default=None, description="base URL the assistant uses for this session")
    seed: int | None = None


class SessionEnded(Payload):
    """A simulated encounter is over; `turns` counts the messages exchanged."""

    reason: Literal["completed", "aborted", "timeout", "error"]
    turns: int = Field(ge=0)
    duration_ms: float | None = Field(default=None, ge=0)
    error: str | None = None
