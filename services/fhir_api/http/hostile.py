"""Refusals of input no FHIR client should send, before it reaches the store: each a 400
OperationOutcome, never a 5xx (PostgreSQL refuses NUL in text; SQL statements have a bounded size).

- Resource bodies: control characters other than tab, CR and LF in any string (FHIR `string` is
  `[ \\r\\n\\t\\S]+`; a NUL cannot even be stored in PostgreSQL text), and empty elements — `{}` below the top
  level, `[]`, `""` — which FHIR JSON forbids (ele-1: an element has a value or children); `null` stands only
  inside a primitive array and its `_name` array of extensions, as the placeholder of an index that has
  something in the other array, and the two arrays pair index by index (FHIR JSON's primitive extensions).
- Searches and conditional criteria: at most `MAX_SEARCH_PARAMS` parameters and `MAX_SEARCH_VALUES` OR
  alternatives in all (services/fhir_api/limits.py).
"""

from __future__ import annotations

import re
from typing import Any

from services.fhir_api.http.errors import FhirHttpError
from services.fhir_api.limits import MAX_SEARCH_PARAMS, MAX_SEARCH_VALUES

# C0 controls but tab, LF and CR, and DEL: one regex scan (str.translate with a table walks non-ASCII text
# char by char through a dict, ~13x slower on narrative-heavy bodies)
_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def check_document(value: Any, where: str = "") -> None:
    """400 at the first forbidden string or empty element of a parsed JSON body."""
    if isinstance(value, dict):
        if not value and where:
            raise FhirHttpError(400, f"{where}: empty object (FHIR elements must have a value or children)")
        for key, item in value.items():
            _check_text(key, where)
            path = f"{where}.{key}" if where else key
            if item is None:
                raise FhirHttpError(400, f"{path}: null is not a FHIR value")
            if isinstance(item, list):
                _check_pairing(value, key, item, path)
            check_document(item, path)
    elif isinstance(value, list):
        if not value:
            raise FhirHttpError(400, f"{where}: empty array (leave the element out)")
        for index, item in enumerate(value):
            if item is not None:
                check_document(item, f"{where}[{index}]")
    elif isinstance(value, str):
        if not value:
            raise FhirHttpError(400, f"{where}: empty string (leave the element out)")
        _check_text(value, where)


def _check_pairing(parent: dict, key: str, items: list, path: str) -> None:
    """An array of primitives and its `_name` array of their extensions (FHIR JSON, "Representing primitive
    elements"): both arrays, of one length when both are present, and a null at an index of one only where
    the other has something there (a null in both, or in a lone array, would be an element with neither value
    nor extension). Arrays of other elements have no `_name` partner, so they hold no null at all."""
    partner_key = key[1:] if key.startswith("_") else f"_{key}"
    partner = parent.get(partner_key)
    if partner is None and None not in items:
        return  # the common case: an array with no nulls and no partner
    if partner is not None and not isinstance(partner, list):
        raise FhirHttpError(400, f"{path}: an array, but {partner_key} is not (they pair index by index)")
    if partner is not None and len(partner) != len(items):
        raise FhirHttpError(400, f"{path}: {len(items)} entries, {partner_key} {len(partner)} (they pair "
                                 "index by index)")
    missing = "value" if key.startswith("_") else "extension"
    for index, item in enumerate(items):
        if item is None and (partner is None or partner[index] is None):
            raise FhirHttpError(400, f"{path}[{index}]: null with no {missing} at {partner_key}[{index}] (an "
                                     "element needs a value or children)")


def _check_text(text: str, where: str) -> None:
    if _BAD.search(text) is not None:
        raise FhirHttpError(400, f"{where or 'body'}: control characters are not allowed in FHIR strings")


def check_params(params: list[tuple[str, str]]) -> None:
    """400 when a search (or conditional criteria) is beyond the stated limits."""
    if len(params) > MAX_SEARCH_PARAMS:
        raise FhirHttpError(400, f"{len(params)} search parameters; at most {MAX_SEARCH_PARAMS} are accepted",
                            code="too-costly")
    values = sum(value.count(",") + 1 for _name, value in params)
    if values > MAX_SEARCH_VALUES:
        raise FhirHttpError(400, f"{values} search values; at most {MAX_SEARCH_VALUES} alternatives in all",
                            code="too-costly")
