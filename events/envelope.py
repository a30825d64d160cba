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
from typing import Any, Literal

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

MAX_EVENT_BYTES = 256 * 1024
SPEC_VERSION = "1.0"
# Members of the CloudEvent JSON object that are not extensions.
CORE_ATTRIBUTES = frozenset(
    {"id", "source", "specversion", "type", "time", "subject", "datacontenttype", "dataschema", "data"}
)
ROUNDS_EXTENSIONS = frozenset({"sequence", "correlationid", "causationid"})
# The fields that may be None (left out of the JSON then); id, source, specversion and type never are.
OPTIONAL_ATTRIBUTES = ("time", "subject", "datacontenttype", "dataschema", "sequence", "correlationid",
                       "causationid", "data")
_EXTENSION_NAME = re.compile(r"^[a-z0-9]{1,20}$")
# Checked by pydantic-core (fast): opaque ids and whitespace-free attributes. An opaque id is 1-128 chars of
# [A-Za-z0-9._:-] starting with a letter or digit and NOT all digits (an MRN or MIMIC subject_id is PHI):
# a letter first, or digits followed by another allowed character. (Rust's regex has no look-ahead.)
_OPAQUE_ID = r"^(?:[A-Za-z]|[0-9]+[A-Za-z._:-])[A-Za-z0-9._:-]*$"
_OPAQUE_MAX = 128
_OPAQUE = re.compile(_OPAQUE_ID)
_OPAQUE_FIELDS = frozenset({"subject", "correlationid", "causationid"})
_NO_SPACE = r"^\S+$"


class EventError(ValueError):
    """Base of every rejection of an event (bad envelope, unknown type, bad payload, too large, bad JSON)."""


class InvalidEvent(EventError):
    """The envelope or its data does not satisfy the rules."""


class EventTooLarge(EventError):
    """The serialised event exceeds MAX_EVENT_BYTES."""


class CloudEvent(BaseModel):
    """CloudEvents 1.0 attributes plus Rounds' extensions (sequence, correlationid, causationid).

    Immutable: `model_copy(update=...)` builds a new, re-validated event. The serialised bytes and the catalog
    that checked the event are cached privately, so publishing an event made by the catalog costs one dump.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    id: str = Field(min_length=1, max_length=200, pattern=_NO_SPACE)
    source: str = Field(min_length=1, max_length=500, pattern=_NO_SPACE)
    specversion: Literal["1.0"] = SPEC_VERSION
    type: str = Field(min_length=1, max_length=200, pattern=_NO_SPACE)
    time: str | None = None
    subject: str | None = Field(default=None, max_length=_OPAQUE_MAX, pattern=_OPAQUE_ID)
    datacontenttype: str | None = "application/json"
    dataschema: str | None = Field(default=None, pattern=_NO_SPACE)
    sequence: int | None = Field(default=None, ge=0)
    correlationid: str | None = Field(default=None, max_length=_OPAQUE_MAX, pattern=_OPAQUE_ID)
    causationid: str | None = Field(default=None, max_length=_OPAQUE_MAX, pattern=_OPAQUE_ID)
    data: Any = Field(default=None)

    # Plain slots, not pydantic private attributes: free to initialise, never copied by model_copy.
    __slots__ = ("_raw", "_checked_by", "_payload")

    # Every rule pydantic-core can check is a field constraint above (a Python validator costs a call per
    # field per event, on both the producing and the consuming side); the rest is this one validator.
    @model_validator(mode="after")
    def _rules(self) -> CloudEvent:
        if self.time is not None:
            _check_rfc3339(self.time)
        extra = self.__pydantic_extra__
        if extra:
            _check_extensions(extra)
        # Empty caches, set here so that reading them is a plain slot read: an unset slot falls back to
        # pydantic's __getattr__ and an exception (~30x slower, twice per publish).
        object.__setattr__(self, "_raw", None)
        object.__setattr__(self, "_checked_by", None)
        object.__setattr__(self, "_payload", None)
        return self

    def attributes(self) -> dict[str, Any]:
        """Every attribute and extension, including those that are None."""
        return {**self.__dict__, **(self.__pydantic_extra__ or {})}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CloudEvent) and self.attributes() == other.attributes()

    __hash__ = None  # type: ignore[assignment]  # data is a mutable JSON value

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> CloudEvent:
        if not update:
            return super().model_copy(deep=deep)
        return type(self).build(**{**self.attributes(), **update})

    # -- serialisation -------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The structured-mode JSON object (attributes that are None are omitted, as the spec asks).

        A copy of the fields less the optional ones that are None: half the cost of filtering every field
        in a comprehension, once per event published."""
        out = self.__dict__.copy()
        for name in OPTIONAL_ATTRIBUTES:
            if out[name] is None:
                del out[name]
        extra = self.__pydantic_extra__
        if extra:
            out.update((k, v) for k, v in extra.items() if v is not None)
        return out

    def to_bytes(self) -> bytes:
        """orjson bytes (computed once); raises EventTooLarge above MAX_EVENT_BYTES."""
        raw = getattr(self, "_raw", None)
        if raw is None:
            raw = orjson.dumps(self.to_dict(), default=_json_default)
            if len(raw) > MAX_EVENT_BYTES:
                raise EventTooLarge(
                    f"event {self.type} id={self.id} is {len(raw)} bytes serialised; limit {MAX_EVENT_BYTES}"
                )
            object.__setattr__(self, "_raw", raw)
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
        event = cls._validated(obj)
        object.__setattr__(event, "_raw", bytes(raw))
        return event

    @property
    def checked_by(self) -> Any:
        """The catalog that validated this (immutable) event for publishing, if any."""
        return getattr(self, "_checked_by", None)

    def mark_checked(self, catalog: Any) -> None:
        object.__setattr__(self, "_checked_by", catalog)

    @property
    def kept_payload(self) -> Any:
        """The typed payload a catalog validated `data` into (decoding or making the event), if any: a
        consumer that needs the model reads it here instead of validating the same data a second time."""
        return getattr(self, "_payload", None)

    def keep_payload(self, payload: Any) -> None:
        object.__setattr__(self, "_payload", payload)

    @classmethod
    def build(cls, **attributes: Any) -> CloudEvent:
        """Construct, turning pydantic's ValidationError into InvalidEvent (missing/invalid attributes)."""
        return cls._validated(attributes)

    @classmethod
    def _validated(cls, attributes: dict[str, Any]) -> CloudEvent:
        # The model's validator on the dict itself: what `cls(**attributes)` runs, without repacking keywords.
        try:
            return cls.__pydantic_validator__.validate_python(attributes)
        except ValidationError as exc:
            problems = "; ".join(_explain(err) for err in exc.errors())
            raise InvalidEvent(f"invalid CloudEvent: {problems}") from None


def is_opaque_id(value: str) -> bool:
    """Whether `value` may be an event's subject or correlation id (what the envelope's fields accept)."""
    return len(value) <= _OPAQUE_MAX and _OPAQUE.fullmatch(value) is not None


def _check_rfc3339(value: str) -> None:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"time must be RFC 3339, got {value!r}") from exc
    if parsed.tzinfo is None:
        raise ValueError(f"time must carry a timezone offset, got {value!r}")


def _check_extensions(extra: dict[str, Any]) -> None:
    for name, value in extra.items():
        if not _EXTENSION_NAME.match(name):
            raise ValueError(f"extension attribute name {name!r} must be 1-20 lowercase letters or digits")
        if value is not None and not isinstance(value, str | int | bool):
            raise ValueError(f"extension attribute {name!r} must be a string, integer or boolean")


def _explain(err: Any) -> str:
    loc = err["loc"]
    where = ".".join(str(p) for p in loc) or "event"
    kind, value = err["type"], err.get("input")
    if loc == ("specversion",) and kind == "literal_error":
        return f"specversion: specversion must be {SPEC_VERSION!r}, got {value!r}"
    if len(loc) == 1 and loc[0] in _OPAQUE_FIELDS and kind in ("string_pattern_mismatch", "string_too_long"):
        if isinstance(value, str) and value.isdigit():
            return f"{where}: must not be all digits (looks like an MRN/subject_id: PHI)"
        rule = f"[A-Za-z0-9._:-], max {_OPAQUE_MAX}; no PHI: no spaces, no '@'"
        return f"{where}: must be an opaque id ({rule})"
    if kind == "string_pattern_mismatch" and err.get("ctx", {}).get("pattern") == _NO_SPACE:
        return f"{where}: must not contain whitespace"
    return f"{where}: {err['msg']}"


def _json_default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def utc_now() -> str:
    """RFC 3339 timestamp with milliseconds, the form Rounds writes in `time`."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
