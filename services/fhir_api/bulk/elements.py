"""`_elements` of a Bulk Data kick-off: `element` (every type) or `<Type>.element` (that type only), each
type's resources cut down as a search's `_elements` cuts them (http/summary.py: the mandatory elements kept,
the SUBSETTED tag added). A type no name applies to is written whole, as the Bulk Data IG says."""

from __future__ import annotations

import re

from services.fhir_api.http.errors import FhirHttpError
from services.fhir_api.http.summary import Subset
from services.fhir_api.http.validation import served_types

NAME = re.compile(r"^(?:([A-Z][A-Za-z]{1,63})\.)?([a-z][A-Za-z0-9]{0,63}(?:\[x\])?)$")


def parse_elements(values: list[str]) -> list[str] | None:
    """The `_elements` names (comma-separated, repeatable); 400 on a name that is not `[Type.]element` of a
    served type. None when none was given."""
    names = [n.strip() for value in values for n in value.split(",") if n.strip()]
    for name in names:
        found = NAME.match(name)
        if found is None or (found[1] is not None and found[1] not in served_types()):
            raise FhirHttpError(400, f"_elements {name[:80]!r}: expected <element> or "
                                     "<ResourceType>.<element>")
    return names or None


def subset_for(names: list[str] | None, resource_type: str) -> Subset | None:
    """How `resource_type`'s lines are cut down (None: whole)."""
    if not names:
        return None
    mine = [n.split(".", 1)[-1] for n in names if "." not in n or n.startswith(f"{resource_type}.")]
    return Subset(elements=frozenset(mine)) if mine else None
