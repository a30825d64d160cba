"""`rounds.sandbox.state`: a session sandbox's final state as the scorer read it, appended to the session's
log after its end, so that re-scoring needs nothing but the log (a log exported with `rounds events dump`
and loaded where the sandbox does not exist). A state too large for an event is stored whole in
`event_blobs` (events/blobs.py) and the event names it (`state_ref`, its lists then empty): `dump` carries
the blob with the event."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

import orjson
from pydantic import Field, ValidationInfo, ValidatorFunctionWrapHandler, field_validator

from events.payloads.base import Payload
from events.payloads.interaction import DIGEST_PATTERN


class WrittenResource(Payload):
    """The current version of one resource the session wrote (a deletion has no resource)."""

    resource_type: str = Field(pattern=r"^[A-Z][A-Za-z]{1,63}$")
    id: str = Field(min_length=1, max_length=64)
    version_id: int = Field(ge=0)
    deleted: bool = False
    method: str = "PUT"
    resource: dict[str, Any] | None = None


class SandboxValue(Payload):
    """A result of the shared record for a code the scenario's facts name (any time; its clinical time)."""

    code: str
    value: float
    unit: str | None = None
    time: datetime | None = None
    reference: str


class SandboxState(Payload):
    TYPE: ClassVar[str] = "rounds.sandbox.state"
    writes: list[WrittenResource] = Field(default_factory=list)
    record_values: list[SandboxValue] = Field(default_factory=list)
    state_ref: str | None = Field(default=None, pattern=DIGEST_PATTERN,
                                  description="stored copy of the whole state (this payload's JSON)")
    state_size: int | None = Field(default=None, ge=0, description="bytes of the stored state")

    @field_validator("record_values", mode="wrap")
    @classmethod
    def _same_values_once(cls, value: Any, handler: ValidatorFunctionWrapHandler,
                          info: ValidationInfo) -> list[SandboxValue]:
        """The record's values as validated before when they are the same JSON: the states of every session
        on one patient hold the same results of the shared record (~100 values, ~0.25 ms to validate, the
        most of reading a state back from the log). The list is shared: read it, never change it."""
        try:
            key = info.mode.encode() + orjson.dumps(value)  # python or JSON input: the same rules, apart
        except TypeError:  # not plain JSON (models, other objects): validated as given
            return handler(value)
        found = _VALIDATED.get(key)
        if found is None:
            found = handler(value)  # a ValidationError is raised as without the memo, nothing kept
            if len(_VALIDATED) >= VALIDATED_LISTS:
                _VALIDATED.pop(next(iter(_VALIDATED)))
            _VALIDATED[key] = found
        return found


VALIDATED_LISTS = 256  # distinct record value lists kept (patients of the runs being read)
_VALIDATED: dict[bytes, list[SandboxValue]] = {}
