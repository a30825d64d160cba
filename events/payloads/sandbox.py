"""`rounds.sandbox.state`: a session sandbox's final state as the scorer read it, appended to the session's
log after its end, so that re-scoring needs nothing but the log (a log exported with `rounds events dump`
and loaded where the sandbox does not exist)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from pydantic import Field

from events.payloads.base import Payload


class WrittenResource(Payload):
    """The current version of one resource the session wrote (a deletion has no resource)."""

    resource_type: str = Field(pattern=r"^[A-Z][A-Za-z]{1,63}$")
    id: str = Field(min_length=1, max_length=64)
    version_id: int = Field(ge=0)
    deleted: bool = False
    method: str = "PUT"
    resource: dict[str, Any] | None = None


class RecordValue(Payload):
    """A result of the shared record for a code the scenario's facts name (any time; its clinical time)."""

    code: str
    value: float
    unit: str | None = None
    time: datetime | None = None
    reference: str


class SandboxState(Payload):
    TYPE: ClassVar[str] = "rounds.sandbox.state"
    writes: list[WrittenResource] = Field(default_factory=list)
    record_values: list[RecordValue] = Field(default_factory=list)
