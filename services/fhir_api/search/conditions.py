"""One search value -> a SQL condition on its index table (every parameter type, prefix and modifier).

Every value is bound as a parameter (SQL metacharacters are data); malformed values raise InvalidSearch.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import ColumnElement, Table, and_, false, literal, not_, or_

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


def token(t: Table, value: str, modifier: str | None) -> ColumnElement[bool]:
    if modifier == "text":
        return t.c.text.like(f"%{_like(normalize(value))}%", escape="\\")
    if modifier not in (None, "not"):
        raise InvalidSearch(f"modifier :{modifier} is not supported on token parameters")
    if "|" not in value:
        return t.c.code == value
    system, code = value.split("|", 1)
    if not system:
        return and_(t.c.system.is_(None), t.c.code == code)
    return and_(t.c.system == system, t.c.code == code) if code else t.c.system == system


def string(t: Table, value: str, modifier: str | None) -> ColumnElement[bool]:
    if modifier == "exact":
        return t.c.exact == value
    if modifier == "contains":
        return t.c.norm.like(f"%{_like(normalize(value))}%", escape="\\")
    if modifier is not None:
        raise InvalidSearch(f"modifier :{modifier} is not supported on string parameters")
    return t.c.norm.like(f"{_like(normalize(value))}%", escape="\\")


def uri(t: Table, value: str, modifier: str | None) -> ColumnElement[bool]:
    if modifier == "below":
        return t.c.value.like(f"{_like(value)}%", escape="\\")
    if modifier == "above":
        parts = value.split("/")
        return t.c.value.in_(["/".join(parts[:i]) for i in range(1, len(parts) + 1)])
    if modifier is not None:
        raise InvalidSearch(f"modifier :{modifier} is not supported on uri parameters")
    return t.c.value == value


def reference(t: Table, value: str, modifier: str | None, targets: tuple[str, ...]) -> ColumnElement[bool]:
    if modifier is not None and not (modifier[:1].isupper() and modifier.isalpha()):
        raise InvalidSearch(f"modifier :{modifier} is not supported on reference parameters")
    rtype, rid, url = parse_reference(value)
    if modifier:
        if rtype and rtype != modifier:
            return false()
        rtype = modifier
    if rid is None and url is None:
        raise InvalidSearch(f"'{value}' is not a reference")
    conds = []
    if rid is not None:
        conds.append(and_(t.c.target_id == rid, t.c.target_type == rtype) if rtype else t.c.target_id == rid)
    if url is not None:
        conds.append(t.c.url == url)
    return or_(*conds)


def _date_bounds(value: str) -> tuple[str, int, int]:
    prefix, rest = split_prefix(value)
    rng = date_range(rest)
    if rng is None:
        raise InvalidSearch(f"'{value}' is not a valid date/dateTime search value")
    return prefix, rng[0], rng[1]


def date(t: Table, value: str, modifier: str | None) -> ColumnElement[bool]:
    if modifier is not None:
        raise InvalidSearch(f"modifier :{modifier} is not supported on date parameters")
    prefix, lo, hi = _date_bounds(value)
    return date_between(t.c.low, t.c.high, prefix, lo, hi)


def date_between(low, high, prefix: str, lo: int, hi: int) -> ColumnElement[bool]:
    """FHIR range semantics between a stored [low, high) and the searched [lo, hi)."""
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
    gap = max(DAY_US, abs(to_us(datetime.now(UTC)) - lo) // 10)  # ap: within 10 % of the distance to now
    return and_(low < hi + gap, high > lo - gap)


def _number_cond(col, value: str) -> ColumnElement[bool]:
    prefix, rest = split_prefix(value)
    parsed = decimal_range(rest)
    if parsed is None:
        raise InvalidSearch(f"'{value}' is not a valid number")
    v, lo, hi = parsed
    exact = and_(col >= lo, col < hi)
    return {
        "eq": exact,
        "ne": not_(exact),
        "gt": col > v,
        "lt": col < v,
        "ge": col >= v,
        "le": col <= v,
        "sa": col > v,
        "eb": col < v,
        "ap": and_(col >= v - abs(v) * 0.1, col <= v + abs(v) * 0.1),
    }[prefix]


def number(t: Table, value: str, modifier: str | None) -> ColumnElement[bool]:
    if modifier is not None:
        raise InvalidSearch(f"modifier :{modifier} is not supported on number parameters")
    return _number_cond(t.c.value, value)


def quantity(t: Table, value: str, modifier: str | None) -> ColumnElement[bool]:
    if modifier is not None:
        raise InvalidSearch(f"modifier :{modifier} is not supported on quantity parameters")
    parts = value.split("|")
    if len(parts) not in (1, 3):
        raise InvalidSearch(f"'{value}' is not number|system|code")
    cond = _number_cond(t.c.value, parts[0])
    if len(parts) == 3:
        system, code = parts[1], parts[2]
        if system:
            cond = and_(cond, t.c.system == system)
        if code:
            cond = and_(cond, t.c.code == code if system else or_(t.c.code == code, t.c.unit == code))
    return cond


def check_value(kind: str, value: str) -> None:
    """Reject values no index row could ever match because they are malformed (400, not an empty page)."""
    if kind == "date":
        _date_bounds(value)
    elif kind in ("number", "quantity"):
        _number_cond(literal(0), value.split("|")[0])
