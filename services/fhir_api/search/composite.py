"""Composite search parameters: `code-value-quantity=<token>$<quantity>` and its siblings.

The generator (scripts/gen_search_params.py) supports only composites over the resource itself, whose
components each occur once per resource: the composite matches a resource when every component's own
parameter matches it, so each component is answered by that parameter's filter (query.param_filter) and
the composite is their conjunction. Comma-separated values are alternatives; within one, `$` separates the
components (`\\$` is a literal dollar) and each component takes its own parameter's syntax, prefixes included.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from sqlalchemy import ColumnElement, Select, and_, or_

from services.fhir_api.search import conditions
from services.fhir_api.search.registry import SearchParam
from services.fhir_api.store.interface import InvalidSearch


class ComponentFilter(Protocol):
    key: tuple | None
    values: dict[str, Any]
    make: Callable[[Any, Any], ColumnElement | Select]


# (component parameter name, its value, bind-name prefix) -> that parameter's filter
FilterOf = Callable[[str, str, str], ComponentFilter | None]


def split_components(value: str, count: int, name: str) -> list[str]:
    """One composite value -> its `count` component values (split on unescaped `$`)."""
    parts, current, i = [], "", 0
    while i < len(value):
        if value.startswith("\\$", i):
            current, i = current + "$", i + 2
        elif value[i] == "$":
            parts.append(current)
            current, i = "", i + 1
        else:
            current, i = current + value[i], i + 1
    parts.append(current)
    if len(parts) != count or "" in parts:
        raise InvalidSearch(f"{name} takes {count} values joined by '$', got {value!r}")
    # A component value is parsed as its own parameter's value list again: keep its commas literal.
    return [part.replace(",", "\\,") for part in parts]


def filter_parts(
    param: SearchParam, modifier: str | None, value: str, prefix: str, filter_of: FilterOf
) -> tuple[tuple | None, dict[str, Any], Callable[[Any, Any], ColumnElement]]:
    """(shape key, bound values, condition builder) of a composite parameter — query.Filter's fields."""
    if modifier is not None:
        raise InvalidSearch(f"modifier :{modifier} is not supported on composite parameter {param.name}")
    alternatives = []
    for i, item in enumerate(conditions.split_values(value)):
        parts = split_components(item, len(param.components), param.name)
        pairs = enumerate(zip(param.components, parts, strict=True))
        found = [filter_of(component, part, f"{prefix}_{i}_{j}") for j, (component, part) in pairs]
        if None in found:
            raise InvalidSearch(f"{param.name}: a component parameter is not supported")
        alternatives.append(found)
    keys = tuple(tuple(f.key for f in found) for found in alternatives)
    key = None if any(None in k for k in keys) else (param.name, keys)
    values = {n: v for found in alternatives for f in found for n, v in f.values.items()}

    def make(r, bind) -> ColumnElement:
        def held(f: ComponentFilter) -> ColumnElement:
            cond = f.make(r, bind)
            return r.c.rid.in_(cond) if isinstance(cond, Select) else cond

        return or_(*(and_(*map(held, found)) for found in alternatives))

    return key, values, make
