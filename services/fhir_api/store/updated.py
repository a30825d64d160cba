"""`_lastUpdated` searched on the resource row's own `last_updated`, as HAPI reads its resource table.

Every resource has exactly one lastUpdated, the moment it was written, which fhir_resource keeps: a date
index row per resource repeated it (a bulk load wrote 245 k of them for the MIMIC demo, all with the load's
time) and was a tenth of the index rows to write, sort and analyze. `_sort=_lastUpdated` already reads the
column, so filter and sort now agree on one value. The stored instant is a point: the FHIR prefixes compare
it with the searched value's range [lo, hi), as `conditions.date_between` does for ranges.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy import ColumnElement, and_, false, not_, or_, true

from services.fhir_api.search.values import from_us
from services.fhir_api.store import conditions, modifiers

NAME = "_lastUpdated"


def parse(value: str, modifier: str | None) -> tuple[tuple, list[datetime]] | bool:
    """The prefixes of the comma-separated values and their bounds as instants (lo, hi of each in turn),
    or for `:missing` whether the search matches every resource (false) or none (true)."""
    if modifier == "missing":
        return not modifiers.missing(value)
    shapes, bounds = [], []
    for item in conditions.split_values(value):
        (prefix,), (lo, hi) = conditions.date(item, modifier)
        shapes.append(prefix)
        bounds += [from_us(lo), from_us(hi)]
    return tuple(shapes), bounds


def filter_parts(value: str, modifier: str | None, prefix: str) -> tuple[tuple, dict, Callable]:
    """A query.Filter's shape, bound values (named after `prefix`) and condition builder (alias r, binder)."""
    parsed = parse(value, modifier)
    if isinstance(parsed, bool):
        return (NAME, parsed), {}, lambda r, bind: true() if parsed else false()
    shapes, bounds = parsed
    bound = {f"{prefix}_{i}": v for i, v in enumerate(bounds)}
    return (
        (NAME, shapes),
        bound,
        lambda r, bind: condition(r.c.last_updated, shapes, [bind(n, v) for n, v in bound.items()]),
    )


def condition(column, prefixes: tuple[str, ...], binds: list) -> ColumnElement[bool]:
    """Any of the values: `binds` holds each one's (lo, hi) in turn."""
    return or_(*(_point(column, p, binds[2 * i], binds[2 * i + 1]) for i, p in enumerate(prefixes)))


def _point(t, prefix: str, lo, hi) -> ColumnElement[bool]:
    """FHIR date semantics for the point t (the range [t, t + 1 µs)) against [lo, hi)."""
    if prefix in ("eq", "ap"):  # ap: lo and hi are already widened by the tolerance
        return and_(t >= lo, t < hi)
    if prefix == "ne":
        return not_(and_(t >= lo, t < hi))
    if prefix in ("gt", "sa"):
        return t >= hi
    if prefix in ("lt", "eb"):
        return t < lo
    if prefix == "ge":
        return t >= lo
    return t < hi  # le
