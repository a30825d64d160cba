"""One search value -> a SQL condition on its index table (every parameter type, prefix and modifier); a
parameter's comma-separated values (`split_values`); several filters' rid sets combined (`rid_filters`).

Every value is bound as a parameter (SQL metacharacters are data); malformed values raise InvalidSearch.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, Table, and_, any_, false, func, not_, or_, select

from services.fhir_api.search.values import date_range, decimal_range, normalize, parse_reference, to_us
from services.fhir_api.store.interface import InvalidSearch

PREFIXES = ("eq", "ne", "gt", "lt", "ge", "le", "sa", "eb", "ap")
DAY_US = 86_400_000_000


def split_prefix(value: str) -> tuple[str, str]:
    if len(value) > 2 and value[:2] in PREFIXES and not value[2:3].isalpha():
        return value[:2], value[2:]
    return "eq", value


def _like(value: str) -> str:
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


# Each parameter type is a parser (value, modifier) -> (shape, values) and SQL builders by shape. The shape
# says which SQL a value needs and the values are bound into it, so the engine can build a statement once per
# shape and run it for every request of that shape with the request's values (store/query.py).
Parsed = tuple[tuple, tuple]  # (shape: the SQL's form, hashable; values bound into it in the builder's order)


def token(value: str, modifier: str | None) -> Parsed:
    if modifier == "text":
        return ("text",), (f"%{_like(normalize(value))}%",)
    if modifier not in (None, "not"):
        raise InvalidSearch(f"modifier :{modifier} is not supported on token parameters")
    if "|" not in value:
        return ("code",), (value,)
    system, code = value.split("|", 1)
    if not system:
        return ("nosys",), (code,)
    return (("sc",), (system, code)) if code else (("s",), (system,))


def string(value: str, modifier: str | None) -> Parsed:
    if modifier == "exact":
        return ("exact",), (value,)
    if modifier == "contains":
        return ("like",), (f"%{_like(normalize(value))}%",)
    if modifier is not None:
        raise InvalidSearch(f"modifier :{modifier} is not supported on string parameters")
    return ("like",), (f"{_like(normalize(value))}%",)


def uri(value: str, modifier: str | None) -> Parsed:
    if modifier == "below":
        return ("below",), (f"{_like(value)}%",)
    if modifier == "above":
        parts = value.split("/")
        return ("above",), (["/".join(parts[:i]) for i in range(1, len(parts) + 1)],)
    if modifier is not None:
        raise InvalidSearch(f"modifier :{modifier} is not supported on uri parameters")
    return ("eq",), (value,)


def reference(value: str, modifier: str | None) -> Parsed:
    if modifier is not None and not (modifier[:1].isupper() and modifier.isalpha()):
        raise InvalidSearch(f"modifier :{modifier} is not supported on reference parameters")
    rtype, rid, url = parse_reference(value)
    if modifier:
        if rtype and rtype != modifier:
            return ("false",), ()
        rtype = modifier
    if rid is None and url is None:
        raise InvalidSearch(f"'{value}' is not a reference")
    shape, values = [], []
    if rid is not None:
        shape.append("typed" if rtype else "id")
        values += [rid, rtype] if rtype else [rid]
    if url is not None:
        shape.append("url")
        values.append(url)
    return tuple(shape), tuple(values)


def _date_bounds(value: str) -> tuple[str, int, int]:
    prefix, rest = split_prefix(value)
    rng = date_range(rest)
    if rng is None:
        raise InvalidSearch(f"'{value}' is not a valid date/dateTime search value")
    return prefix, rng[0], rng[1]


def date(value: str, modifier: str | None) -> Parsed:
    if modifier is not None:
        raise InvalidSearch(f"modifier :{modifier} is not supported on date parameters")
    prefix, lo, hi = _date_bounds(value)
    if prefix == "ap":  # within 10 % of the distance to now
        gap = max(DAY_US, abs(to_us(datetime.now(UTC)) - lo) // 10)
        return (prefix,), (lo - gap, hi + gap)
    return (prefix,), (lo, hi)


def date_between(low, high, prefix: str, lo, hi) -> ColumnElement[bool]:
    """FHIR range semantics between a stored [low, high) and the searched [lo, hi) (for `ap`: the range
    widened by the tolerance)."""
    contained = and_(low >= lo, high <= hi)
    if prefix == "eq":
        return contained
    if prefix == "ne":
        return not_(contained)
    if prefix == "gt":
        return high > hi
    if prefix == "lt":
        return low < lo
    if prefix == "ge":
        return or_(high > hi, contained)
    if prefix == "le":
        return or_(low < lo, contained)
    if prefix == "sa":
        return low >= hi
    if prefix == "eb":
        return high <= lo
    return and_(low < hi, high > lo)


def _number(value: str) -> Parsed:
    prefix, rest = split_prefix(value)
    parsed = decimal_range(rest)
    if parsed is None:
        raise InvalidSearch(f"'{value}' is not a valid number")
    v, lo, hi = parsed
    if prefix in ("eq", "ne"):
        return (prefix,), (lo, hi)
    if prefix == "ap":
        return (prefix,), (v - abs(v) * 0.1, v + abs(v) * 0.1)
    return (prefix,), (v,)


_NUMBER_SQL = {
    "eq": lambda col, lo, hi: and_(col >= lo, col < hi),
    "ne": lambda col, lo, hi: not_(and_(col >= lo, col < hi)),
    "gt": lambda col, v: col > v,
    "lt": lambda col, v: col < v,
    "ge": lambda col, v: col >= v,
    "le": lambda col, v: col <= v,
    "sa": lambda col, v: col > v,
    "eb": lambda col, v: col < v,
    "ap": lambda col, lo, hi: and_(col >= lo, col <= hi),
}


def number(value: str, modifier: str | None) -> Parsed:
    if modifier is not None:
        raise InvalidSearch(f"modifier :{modifier} is not supported on number parameters")
    return _number(value)


def quantity(value: str, modifier: str | None) -> Parsed:
    if modifier is not None:
        raise InvalidSearch(f"modifier :{modifier} is not supported on quantity parameters")
    parts = value.split("|")
    if len(parts) not in (1, 3):
        raise InvalidSearch(f"'{value}' is not number|system|code")
    shape, values = _number(parts[0])
    if len(parts) == 3:
        system, code = parts[1], parts[2]
        if system:
            shape, values = (*shape, "system"), (*values, system)
        if code:
            shape, values = (*shape, "code" if system else "code-or-unit"), (*values, code)
    return shape, values


def _reference_sql(t: Table, shape: tuple, b: list) -> ColumnElement[bool]:
    if shape == ("false",):
        return false()
    conds, at = [], 0
    for part in shape:
        if part == "typed":
            conds.append(and_(t.c.target_id == b[at], t.c.target_type == b[at + 1]))
            at += 2
        else:
            conds.append((t.c.target_id if part == "id" else t.c.url) == b[at])
            at += 1
    return or_(*conds)


def _quantity_sql(t: Table, shape: tuple, b: list) -> ColumnElement[bool]:
    size = 2 if shape[0] in ("eq", "ne", "ap") else 1
    cond, at = _NUMBER_SQL[shape[0]](t.c.value, *b[:size]), size
    for part in shape[1:]:
        if part == "system":
            cond = and_(cond, t.c.system == b[at])
        elif part == "code":
            cond = and_(cond, t.c.code == b[at])
        else:
            cond = and_(cond, or_(t.c.code == b[at], t.c.unit == b[at]))
        at += 1
    return cond


_TOKEN_SQL = {
    "text": lambda t, v: t.c.text.like(v, escape="\\"),
    "code": lambda t, code: t.c.code == code,
    "nosys": lambda t, code: and_(t.c.system.is_(None), t.c.code == code),
    "sc": lambda t, system, code: and_(t.c.system == system, t.c.code == code),
    "s": lambda t, system: t.c.system == system,
}
_STRING_SQL = {
    "exact": lambda t, v: t.c.exact == v,
    "like": lambda t, v: t.c.norm.like(v, escape="\\"),
}
_URI_SQL = {
    "below": lambda t, v: t.c.value.like(v, escape="\\"),
    "above": lambda t, v: t.c.value.in_(v),
    "eq": lambda t, v: t.c.value == v,
}
PARSERS = {
    "token": token,
    "string": string,
    "uri": uri,
    "reference": reference,
    "date": date,
    "number": number,
    "quantity": quantity,
}
_BUILDERS = {
    "token": lambda t, shape, b: _TOKEN_SQL[shape[0]](t, *b),
    "string": lambda t, shape, b: _STRING_SQL[shape[0]](t, *b),
    "uri": lambda t, shape, b: _URI_SQL[shape[0]](t, *b),
    "reference": _reference_sql,
    "date": lambda t, shape, b: date_between(t.c.low, t.c.high, shape[0], *b),
    "number": lambda t, shape, b: _NUMBER_SQL[shape[0]](t.c.value, *b),
    "quantity": _quantity_sql,
}


def parse(kind: str, value: str, modifier: str | None) -> Parsed:
    """(shape, values) of one search value of a parameter type; InvalidSearch when it is malformed."""
    return PARSERS[kind](value, modifier)


def build(kind: str, t: Table, shape: tuple, binds: list) -> ColumnElement[bool]:
    """The condition on index table t for a parsed shape, with `binds` (bound parameters or plain values)
    standing for the parsed values."""
    return _BUILDERS[kind](t, shape, binds)


def split_values(value: str, sep: str = ",") -> list[str]:
    """Comma-separated OR values ('\\,' is a literal comma); with `sep` "$", a composite value's parts ('\\$'
    a literal dollar). Other escapes are kept for the value's own parser."""
    if "\\" not in value:  # nothing escaped: a plain split
        parts = value.split(sep)
        if "" in parts:
            raise InvalidSearch("empty search value")
        return parts
    parts, cur, i = [], "", 0
    while i < len(value):
        if value[i] == "\\" and i + 1 < len(value) and value[i + 1] in ",$|\\":
            cur += value[i + 1] if value[i + 1] == sep else value[i : i + 2]
            i += 2
            continue
        if value[i] == sep:
            parts.append(cur)
            cur = ""
        else:
            cur += value[i]
        i += 1
    parts.append(cur)
    if any(p == "" for p in parts):
        raise InvalidSearch("empty search value")
    return parts


def rid_filters(
    rid_sets: list[Select], r, postgres: bool = False, probes: Callable[[Any], list] | None = None
) -> list[ColumnElement[bool]]:
    """The plain filters as conditions on r. Several are intersected among themselves first, behind an
    OFFSET 0 fence, so fhir_resource is probed only for the rows that pass them all: left to itself,
    PostgreSQL underestimates a common code and probes fhir_resource for each of its thousands of rids
    (Observation?patient&code&date: ~5,000 buffers and 10 ms; fenced: ~400 buffers and 1.5 ms). The
    fhir_idx_* extended statistics and random_page_cost of migration 0005 / the store's connections keep it
    probing by rid rather than hashing 100,000 rows of e.g. category=laboratory.
    `probes(rid)`: conditions on the first set's rid column (the driving filter's), checked row by row
    inside the fence instead of intersecting rid sets (query.py `Plan.where`).
    On PostgreSQL the result is `rid = ANY(ARRAY(rids))`: the same rows, but the rid set is planned on its own
    (an InitPlan) rather than as one more semi join with fhir_resource, which is then probed by primary key
    once per rid (labs search ≈ 3 % less server CPU; category=laboratory&date=ge…: 140 → 65 ms)."""
    if len(rid_sets) < 2 and probes is None:
        return [r.c.rid.in_(s) for s in rid_sets]
    first, *rest = (s.subquery() for s in rid_sets)
    checks = [first.c.rid.in_(select(s.c.rid)) for s in rest] + (probes(first.c.rid) if probes else [])
    both = select(first.c.rid).where(*checks).offset(0)
    if postgres:
        return [r.c.rid == any_(func.array(both.scalar_subquery()))]
    return [r.c.rid.in_(both)]
