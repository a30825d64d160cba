"""CloudEvents 1.0 structured-mode envelope (placeholder contract; events helper owns and completes it)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class CloudEvent(BaseModel):
    """CloudEvents 1.0 attributes plus Rounds' extensions (sequence, correlationid, causationid)."""

    model_config = ConfigDict(extra="allow")

    id: str
    source: str
    specversion: str = "1.0"
    type: str
    time: str | None = None
    subject: str | None = None
    datacontenttype: str | None = "application/json"
    dataschema: str | None = None
    sequence: int | None = None
    correlationid: str | None = None
    causationid: str | None = None
    data: Any = Field(default=None)
