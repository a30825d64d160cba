"""Composite search parameters: `code-value-quantity=<token>$<quantity>` and its siblings.

A value pairs a token part with a value part (`$` between them, `\\$` a literal dollar; commas separate
alternatives), each in its own parameter's syntax, prefixes included. The generator
(scripts/gen_search_params.py) says how each composite is answered:
- over the resource itself (`code-value-quantity`): both parts occur once per resource, so the composite is
  the conjunction of the component parameters' own filters (query.param_filter) on the same resource;
- over a repeating element (`component-code-value-quantity`, the component half of `combo-…`): both parts
  must match in ONE element, so extraction stores each element's value-part rows under a key made of its
  token part's coding (extract._pairs, keys.pair_label) and the search reads the rows of that one key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, or_, select

from services.fhir_api.search.keys import pair_label, param_key
from services.fhir_api.search.registry import SearchParam, pairs_stored_as
from services.fhir_api.store import conditions
from services.fhir_api.store import models as m
from services.fhir_api.store.filters import Filter
from services.fhir_api.store.interface import InvalidSearch

# (component parameter name, its value, bind-name prefix) -> that parameter's filter (query.param_filter)
FilterOf = Callable[[str, str, str], Filter | None]
Parts = tuple[tuple | None, dict[str, Any], Callable[[Any, Any], ColumnElement]]  # query.Filter's fields


def split_components(value: str, name: str) -> tuple[str, str]:
    """One composite value -> its token part and value part (split on the unescaped `$`)."""
    try:
        parts = conditions.split_values(value, "$")
    except InvalidSearch:  # an empty part
        parts = []
    if len(parts) != 2:
        raise InvalidSearch(f"{name} takes 2 values joined by '$', got {value!r}")
    return parts[0], parts[1]


def filter_parts(
    param: SearchParam, modifier: str | None, value: str, prefix: str, filter_of: FilterOf
) -> Parts:
    """The composite's filter: any alternative, each through the resource or through one of its elements."""
    if modifier is not None:
        raise InvalidSearch(f"modifier :{modifier} is not supported on composite parameter {param.name}")
    keys, values, makers = [], {}, []
    for i, item in enumerate(conditions.split_values(value)):
        key, bound, make = _alternative(param, split_components(item, param.name), f"{prefix}_{i}", filter_of)
        keys.append(key)
        values.update(bound)
        makers.append(make)
    key = None if None in keys else (param.name, tuple(keys))
    return key, values, lambda r, bind: or_(*(make(r, bind) for make in makers))


def _alternative(param: SearchParam, parts: tuple[str, str], prefix: str, filter_of: FilterOf) -> Parts:
    # The components' filters split their value on commas again: keep the literal ones literal.
    escaped = [part.replace(",", "\\,") for part in parts]
    found = [filter_of(c, escaped[j], f"{prefix}_{j}") for j, c in enumerate(param.components)]
    if None in found:
        raise InvalidSearch(f"{param.name}: a component parameter is not supported")
    pairs = [_pair(param, value_kind, parts, f"{prefix}_e{b}") for b, (_, (_, (value_kind, _, _))) in
             enumerate(param.elements)]
    keys = tuple(f.key for f in found)
    key = None if None in keys else (keys, tuple(shape for shape, _, _ in pairs))
    bound = {n: v for f in found for n, v in f.values.items()}
    for _, values, _ in pairs:
        bound.update(values)

    def make(r, bind) -> ColumnElement:
        def held(f: Filter) -> ColumnElement:
            cond = f.make(r, bind)
            return r.c.rid.in_(cond) if isinstance(cond, Select) else cond

        through_resource = [and_(*map(held, found))] if found else []
        return or_(*through_resource, *(r.c.rid.in_(rids(bind)) for _, _, rids in pairs))

    return key, bound, make


def _pair(param: SearchParam, kind: str, parts: tuple[str, str], prefix: str) -> tuple:
    """(shape, bound values, rid Select builder) of an element branch: the value part's condition on the
    rows stored under the token part's key."""
    token_shape, system, code = _token_part(parts[0], param.name)
    label = pair_label(pairs_stored_as(param.resource_type, param.name), system, code)
    value_shape, vals = conditions.parse(kind, parts[1], None)
    names = [f"{prefix}_{j}" for j in range(len(vals))]
    bound = {f"{prefix}_k": param_key(param.resource_type, label), **dict(zip(names, vals, strict=True))}
    table = m.INDEX_TABLES[kind]

    def rids(bind) -> Select:
        cond = conditions.build(kind, table, value_shape, [bind(n, bound[n]) for n in names])
        return select(table.c.rid).where(table.c.param_key == bind(f"{prefix}_k", bound[f"{prefix}_k"]), cond)

    return (token_shape, value_shape), bound, rids


def _token_part(value: str, name: str) -> tuple[str, str | None, str]:
    """(shape, system, code) of the token part as keys.pair_label reads it: `code` any system (None),
    `|code` no system (''), `system|code` exactly; a system alone names no coding."""
    (shape,), parsed = conditions.token(value, None)
    if shape == "s" or not parsed[-1]:
        raise InvalidSearch(f"{name}: the token part needs a code, got {value!r}")
    if shape == "code":
        return shape, None, parsed[0]
    if shape == "nosys":
        return shape, "", parsed[0]
    return shape, parsed[0], parsed[1]  # sc
