"""What the assistant did: EHR HTTP interactions (`rounds.ehr.*`), tool calls (`rounds.tool.*`) and the model
calls that produced no tool result (`rounds.model.call`)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from events.payloads.base import Payload

DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"


class _BodyOrDigest(Payload):
    """A body as recorded: inline when it fits the event, else a stored copy (`body_ref`), always its digest.

    The FHIR server's recorder puts in `body` the body exactly as sent, as text (FHIR JSON keeps the text of
    its decimals, `1.50` is not `1.5`); when the event would exceed the size limit it stores the bytes
    instead and sets `body_ref` (events/blobs.py: `BlobStore(engine).get(body_ref)`)."""

    body: Any = None
    body_digest: str | None = Field(default=None, pattern=DIGEST_PATTERN)
    content_type: str | None = None
    body_ref: str | None = Field(default=None, pattern=DIGEST_PATTERN, description="stored copy of the body")
    body_size: int | None = Field(default=None, ge=0, description="bytes of the body")


class ResourceVersion(Payload):
    """One resource in a response: what the client was given, by type, id and version."""

    resource_type: str = Field(pattern=r"^[A-Z][A-Za-z]{1,63}$")
    id: str = Field(min_length=1, max_length=64)
    version_id: str | None = None


class EhrRequest(_BodyOrDigest):
    """An HTTP request the assistant made to the session's FHIR base."""

    TYPE: ClassVar[str] = "rounds.ehr.request"

    request_id: str = Field(min_length=1)
    method: Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
    url: str = Field(min_length=1, description="path relative to the FHIR base, e.g. Patient/123/$everything")
    query: dict[str, list[str]] = Field(default_factory=dict)


class EhrResponse(_BodyOrDigest):
    """The FHIR server's answer to `request_id`."""

    TYPE: ClassVar[str] = "rounds.ehr.response"

    request_id: str = Field(min_length=1)
    status: int = Field(ge=100, le=599)
    latency_ms: float = Field(ge=0)
    resources: list[ResourceVersion] | None = Field(
        default=None, description="every resource the response returned (a Bundle's entries), as recorded"
    )
    resources_ref: str | None = Field(
        default=None, pattern=DIGEST_PATTERN,
        description="stored copy of `resources` (their JSON list) when it does not fit the event",
    )


class ToolCall(Payload):
    """The assistant invoked a tool (function calling)."""

    TYPE: ClassVar[str] = "rounds.tool.call"

    call_id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    turn: int | None = Field(default=None, ge=0)


class ToolResult(Payload):
    """The tool's output for `call_id`; exactly one of output / error."""

    TYPE: ClassVar[str] = "rounds.tool.result"

    call_id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    output: Any = None
    error: str | None = None
    latency_ms: float | None = Field(default=None, ge=0)
    turn: int | None = Field(default=None, ge=0)
    usage: dict[str, int] | None = Field(default=None, description="model tokens, e.g. prompt/completion")

    @model_validator(mode="after")
    def _output_xor_error(self) -> ToolResult:
        if self.output is not None and self.error is not None:
            raise ValueError("a tool result has either output or error, not both")
        return self


class ModelCall(Payload):
    """A model call of the assistant that produced no tool result to carry its `usage`: cut by the model or
    turn timeout, the run's stop or the step limit, or failed. A call that produced a result is accounted on
    its first `rounds.tool.result` instead, so every model call is recorded exactly once."""

    TYPE: ClassVar[str] = "rounds.model.call"

    outcome: Literal["timeout", "cancelled", "step_limit", "failed"]
    turn: int | None = Field(default=None, ge=0)
    usage: dict[str, int] = Field(description="latency_ms and retries; tokens when the model answered")
    error: str | None = None
