"""Common base for event payloads: camelCase JSON like FHIR, strict about unknown fields."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class Payload(BaseModel):
    """An event's `data`. Field names are snake_case in Python and camelCase in JSON (FHIR style).

    Unknown fields are rejected so that a typo is a publish-time error, not silent data loss; additive changes
    are made by adding optional fields to the model (see the upgrade rule in docs/events/README.md).
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    # The CloudEvent type this payload is the `data` of, declared on the class so that the catalog is built
    # from the classes and producers and consumers name a type by its class (`SessionEnded.TYPE`), never by
    # a string they spell. Empty on the parts of a payload (a score's check, a response's resource).
    TYPE: ClassVar[str] = ""

    def to_data(self) -> dict:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
