"""Leniency real clients need, as HAPI FHIR has it: applied to search parameters before the
store sees them, unless the client asked for strict handling (`Prefer: handling=strict`).

- An empty value (`Patient?given=&family=&birthdate=`, as MedAgentBench's agents send) is ignored: the
  parameter is dropped (the self link does not list it). Strict handling keeps it, and the store refuses it.
- A dateTime whose `+hh:mm` offset arrived as a space (an unencoded `+` in the query string decodes to a
  space: `date=ge2115-10-18T11:00:00+00:00`) is read with its `+` back. Only a value that is exactly a
  dateTime with a space before a `hh:mm` offset is touched, so no other value can change meaning.
"""

from __future__ import annotations

import re

_SPACED_OFFSET = re.compile(
    r"^((?:eq|ne|gt|lt|ge|le|sa|eb|ap)?\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?) (\d{2}:\d{2})$"
)


def lenient(params: list[tuple[str, str]], strict: bool) -> list[tuple[str, str]]:
    """`params` as HAPI would read them (unchanged under strict handling)."""
    if strict:
        return params
    kept = []
    for name, value in params:
        if value == "":
            continue
        if " " in value:
            value = ",".join(_SPACED_OFFSET.sub(r"\1+\2", part) for part in value.split(","))
        kept.append((name, value))
    return kept
