"""JSON that keeps FHIR decimals as written.

FHIR decimals carry precision in their text (`1.50` ≠ `1.5` for a lab value), so resources written over HTTP
are parsed with each decimal kept as a float that remembers its text, and serialised back with that text.
"""

from __future__ import annotations

import json
from typing import Any

import orjson


class JsonDecimal(float):
    """A float (so validation and indexing see a number) that remembers its original JSON text."""

    __slots__ = ("text",)

    def __new__(cls, text: str) -> JsonDecimal:
        value = super().__new__(cls, text)
        value.text = text
        return value


def loads(data: bytes | str) -> Any:
    """Parse JSON; decimals become JsonDecimal. Raises ValueError (json.JSONDecodeError) when malformed."""
    return json.loads(data, parse_float=JsonDecimal)


def _default(value: Any) -> Any:
    if isinstance(value, JsonDecimal):
        return orjson.Fragment(value.text)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def dumps(value: Any) -> bytes:
    """Serialise with orjson, writing every JsonDecimal with its original text."""
    return orjson.dumps(value, default=_default)
