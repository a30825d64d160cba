"""CloudEvents 1.0 structured-mode JSON envelope, validated on construction.

Rules enforced here (documented in events/README.md):
- required context attributes `id`, `source`, `specversion` ("1.0"), `type`; `time` is RFC 3339 when present;
- extension attributes are lowercase a-z/0-9 (CloudEvents naming rule) with scalar values;
- no PHI in context attributes: `subject`, `correlationid` and `causationid` are opaque ids (a uuid or slug of
  [A-Za-z0-9._:-], never all digits like an MRN or MIMIC subject_id, never spaces (names) or '@' (emails));
- the serialised event is at most `MAX_EVENT_BYTES` (256 KiB) so a record always fits a Kafka request.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

MAX_EVENT_BYTES = 256 * 1024
SPEC_VERSION = "1.0"
# Members of the CloudEvent JSON object that are not extensions.
CORE_ATTRIBUTES = frozenset(
    {"id", "source", "specversion", "type", "time", "subject", "datacontenttype", "dataschema", "data"}
)
ROUNDS_EXTENSIONS = frozenset({"sequence", "correlationid", "causationid"})
_EXTENSION_NAME = re.compile(r"^[a-z0-9]{1,20}$")
_OPAQUE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
_ALL_DIGITS = re.compile(r"^[0-9]+$")
_NO_SPACE = re.compile(r"^\S+$")


class EventError(ValueError):
    """Base of every rejection of an event (bad envelope, unknown type, bad payload, too large, bad JSON)."""


class InvalidEvent(EventError):
    """The envelope or its data does not satisfy the rules."""


class EventTooLarge(EventError):
    """The serialised event exceeds MAX_EVENT_BYTES."""


def _check_opaque(name: str, value: str | None) -> str | None:
    if value is None:
        return value
    if not _OPAQUE_ID.match(value):
        raise ValueError(
            f"{name} must be an opaque id ([A-Za-z0-9._:-], max 128 chars, no spaces), got {value!r}"
        )
    if _ALL_DIGITS.match(value):
        raise ValueError(f"{name} must not be all digits (looks like an MRN/subject_id: PHI), got {value!r}")
    return value


class CloudEvent(BaseModel):
    """CloudEvents 1.0 attributes plus Rounds' extensions (sequence, correlationid, causationid)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    id: str = Field(min_length=1, max_length=200)
    source: str = Field(min_length=1, max_length=500)
    specversion: str = SPEC_VERSION
    type: str = Field(min_length=1, max_length=200)
    time: str | None = None
    subject: str | None = None
    datacontenttype: str | None = "application/json"
    dataschema: str | None = None
    sequence: int | None = Field(default=None, ge=0)
    correlationid: str | None = None
    causationid: str | None = None
    data: Any = Field(default=None)

    @field_validator("id", "source", "type", "dataschema")
    @classmethod
    def _no_whitespace(cls, value: str | None) -> str | None:
        if value is not None and not _NO_SPACE.match(value):
            raise ValueError(f"must not contain whitespace, got {value!r}")
        return value

    @field_validator("specversion")
    @classmethod
    def _spec_version(cls, value: str) -> str:
        if value != SPEC_VERSION:
            raise ValueError(f"specversion must be {SPEC_VERSION!r}, got {value!r}")
        return value

    @field_validator("time")
    @classmethod
    def _rfc3339(cls, value: str | None) -> str | None:
        if value is None:
            return value
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise ValueError(f"time must be RFC 3339, got {value!r}") from exc
        if parsed.tzinfo is None:
            raise ValueError(f"time must carry a timezone offset, got {value!r}")
        return value

    @field_validator("subject", "correlationid", "causationid")
    @classmethod
    def _opaque(cls, value: str | None, info) -> str | None:
        return _check_opaque(info.field_name, value)

    @model_validator(mode="after")
    def _extensions(self) -> CloudEvent:
        for name, value in (self.model_extra or {}).items():
            if not _EXTENSION_NAME.match(name):
                raise ValueError(
                    f"extension attribute name {name!r} must be 1-20 lowercase letters or digits"
                )
            if value is not None and not isinstance(value, str | int | bool):
                raise ValueError(f"extension attribute {name!r} must be a string, integer or boolean")
        return self

    # -- serialisation -------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The structured-mode JSON object (attributes that are None are omitted, as the spec asks)."""
        return {k: v for k, v in self.model_dump(mode="json").items() if v is not None or k == "data"}

    def to_bytes(self) -> bytes:
        """orjson bytes; raises EventTooLarge above MAX_EVENT_BYTES."""
        raw = orjson.dumps(self.to_dict())
        if len(raw) > MAX_EVENT_BYTES:
            raise EventTooLarge(
                f"event {self.type} id={self.id} is {len(raw)} bytes serialised; limit {MAX_EVENT_BYTES}"
            )
        return raw

    @classmethod
    def from_bytes(cls, raw: bytes) -> CloudEvent:
        """Parse structured-mode JSON; every failure is an EventError with a readable reason."""
        if len(raw) > MAX_EVENT_BYTES:
            raise EventTooLarge(f"record is {len(raw)} bytes; the limit is {MAX_EVENT_BYTES}")
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise InvalidEvent(f"not valid JSON: {exc}") from exc
        if not isinstance(obj, dict):
            raise InvalidEvent(f"a CloudEvent is a JSON object, got {type(obj).__name__}")
        return cls.build(**obj)

    @classmethod
    def build(cls, **attributes: Any) -> CloudEvent:
        """Construct, turning pydantic's ValidationError into InvalidEvent (missing/invalid attributes)."""
        try:
            return cls(**attributes)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'event'}: {err['msg']}" for err in exc.errors()
            )
            raise InvalidEvent(f"invalid CloudEvent: {problems}") from None


def utc_now() -> str:
    """RFC 3339 timestamp with milliseconds, the form Rounds writes in `time`."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
