"""Modifiers any search parameter takes, whatever its type: the value of `:missing`.

Parameters with index rows (query.py) and `_lastUpdated`, on the resource row's own column (updated.py),
answer `:missing` from different places; what it may say is checked once, here.
"""

from __future__ import annotations

from services.fhir_api.store.interface import InvalidSearch


def missing(value: str) -> bool:
    """`:missing=true` asks for the resources without a value of the parameter, `false` for those with one;
    anything else is the client's error (400)."""
    if value not in ("true", "false"):
        raise InvalidSearch(":missing takes true or false")
    return value == "true"
