"""FieldConstraint evaluation against a written resource (scenario.py documents the ops).

Paths are simple FHIR paths: dot-separated element names, an optional `[n]` index; a list without an index
matches when any element does."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from contracts.scenario import FieldConstraint
from services.consumers.scoring.text import normalize
from services.consumers.scoring.units import canonical_unit, convert

_STEP = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:\[(\d+)\])?$")
_DURATION = re.compile(r"^P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$")


def values_at(node: Any, path: str) -> list[Any]:
    """Every value at `path` under `node` (lists flattened unless indexed)."""
    current = [node]
    for step in path.split("."):
        match = _STEP.match(step)
        if not match:
            raise ValueError(f"unsupported path step {step!r}")
        name, index = match.group(1), match.group(2)
        found: list[Any] = []
        for item in current:
            value = item.get(name) if isinstance(item, dict) else None
            if value is None:
                continue
            if isinstance(value, list):
                if index is not None:
                    if int(index) < len(value):
                        found.append(value[int(index)])
                else:
                    found.extend(value)
            elif index is None or index == "0":
                found.append(value)
        current = found
    return current


def parse_duration(text: str) -> timedelta:
    match = _DURATION.match(text or "")
    if not match or not any(match.groups()):
        raise ValueError(f"not an ISO-8601 duration: {text!r}")
    weeks, days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return timedelta(weeks=weeks, days=days, hours=hours, minutes=minutes, seconds=seconds)


def parse_time(value: Any) -> datetime | None:
    if isinstance(value, dict):  # a Period: its start (or end)
        value = value.get("start") or value.get("end")
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return aware(moment)


def aware(moment: datetime) -> datetime:
    """A time without a zone is UTC (the record's times and the session clock are)."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _leaves(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [text for v in value.values() for text in _leaves(v)]
    if isinstance(value, list):
        return [text for v in value for text in _leaves(v)]
    return [str(value)] if value is not None else []


def _number(value: Any, unit: str | None, constraint: FieldConstraint) -> float | None:
    """A number at the path, in the constraint's unit when both say one (a Quantity carries its own)."""
    if isinstance(value, dict):
        unit = value.get("unit") or value.get("code")
        value = value.get("value")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    want = canonical_unit(constraint.unit) or constraint.unit
    have = canonical_unit(unit) or unit
    if want and have and want != have:
        return convert(float(value), have, want)
    return float(value)


def _sibling_unit(resource: dict, path: str) -> str | None:
    """For a path ending in `.value` of a Quantity, the Quantity's unit."""
    if not path.endswith(".value"):
        return None
    for quantity in values_at(resource, path.rsplit(".", 1)[0]):
        if isinstance(quantity, dict):
            return quantity.get("unit") or quantity.get("code")
    return None


def _reference_matches(value: Any, target: str) -> bool:
    reference = value.get("reference") if isinstance(value, dict) else value
    return isinstance(reference, str) and (reference == target or reference.endswith("/" + target))


def _coding_matches(value: Any, target: str) -> bool:
    system, _, code = target.rpartition("|")
    codings = value.get("coding", []) if isinstance(value, dict) and "coding" in value else [value]
    return any(
        isinstance(c, dict) and c.get("code") == code and (not system or c.get("system") == system)
        for c in codings
    )


def satisfied(resource: dict, constraint: FieldConstraint, now: datetime) -> bool:
    """Whether `resource` meets `constraint` (the session clock `now` for after_now/before_now)."""
    values = values_at(resource, constraint.path)
    op, target = constraint.op, constraint.value
    if op == "exists":
        return any(v not in ("", [], {}) for v in values)
    if op == "equals":
        return any(v == target or (_is_number(v) and _is_number(target) and float(v) == float(target))
                   or (isinstance(v, str) and isinstance(target, str) and v.lower() == target.lower())
                   for v in values)
    if op == "coding":
        return any(_coding_matches(v, str(target)) for v in values)
    if op == "reference":
        return any(_reference_matches(v, str(target)) for v in values)
    if op == "contains":
        needle = normalize(str(target))
        return any(needle in normalize(text) for v in values for text in _leaves(v))
    if op == "approx":
        unit = _sibling_unit(resource, constraint.path)
        tolerance = constraint.tolerance if constraint.tolerance is not None else 1e-6
        numbers = [_number(v, unit, constraint) for v in values]
        return any(n is not None and abs(n - float(target)) <= tolerance + 1e-9 for n in numbers)
    if op in ("after_now", "before_now"):
        bound = parse_duration(target) if target else None
        moment = aware(now)
        for v in values:
            when = parse_time(v)
            if when is None:
                continue
            if op == "after_now" and when > moment and (bound is None or when <= moment + bound):
                return True
            if op == "before_now" and when <= moment and (bound is None or when >= moment - bound):
                return True
        return False
    raise ValueError(f"unknown constraint op {op!r}")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
