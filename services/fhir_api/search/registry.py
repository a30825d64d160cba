"""The generated search-parameter table (search_params.json, made by scripts/gen_search_params.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

TABLE_PATH = Path(__file__).with_name("search_params.json")


@dataclass(frozen=True)
class SearchParam:
    resource_type: str
    name: str
    type: str  # token | string | date | number | quantity | reference | uri | composite | special
    documentation: str
    expression: str
    targets: tuple[str, ...]
    paths: tuple[tuple[tuple, str], ...]  # (steps, terminal FHIR type) per union branch
    unsupported: str | None = None
    components: tuple[str, ...] = ()  # a composite's parameters ANDed on the resource itself
    # a composite over repeating elements: (element steps, ((kind, steps, FHIR type) of its token part, of its
    # value part), relative to the element) per element branch
    elements: tuple[tuple[tuple, tuple[tuple[str, tuple, str], ...]], ...] = ()
    absent: str | None = None  # the value of a resource without the element (Patient.deceased: false)


@cache
def _table() -> dict:
    return json.loads(TABLE_PATH.read_text())


@cache
def params_for(resource_type: str) -> dict[str, SearchParam]:
    """Every parameter the spec defines for the type (supported or not), by name."""
    raw = _table()["resources"].get(resource_type, {})
    return {
        name: SearchParam(
            resource_type,
            name,
            e["type"],
            e["doc"],
            e["expression"],
            tuple(e["targets"]),
            tuple((_steps(p["steps"]), p["type"]) for p in e["paths"]),
            e.get("unsupported"),
            tuple(e.get("components", ())),
            tuple(
                (_steps(el["steps"]), tuple((p["kind"], _steps(p["steps"]), p["type"]) for p in el["parts"]))
                for el in e.get("elements", ())
            ),
            e.get("absent"),
        )
        for name, e in raw.items()
    }


def _steps(raw: list) -> tuple:
    """A compiled path from the JSON table (lists) as hashable tuples."""
    return tuple(tuple(s) if s[0] != "c" else (s[0], s[1], tuple(s[2])) for s in raw)


Stored = tuple[tuple[str, str | None], ...]  # (parameter whose index rows serve, target type they must have)

# Parameters answered from fhir_resource's own columns, not from index rows: no rows are extracted for them,
# and searches and sorts read the column (store/query.py, store/updated.py).
ROW_COLUMNS: dict[str, str] = {"_id": "res_id", "_lastUpdated": "last_updated"}


@cache
def stored_as(resource_type: str, name: str) -> Stored:
    """Whose index rows answer parameter `name`: its own, or — derived from the paths, so no list to keep —
    those of other parameters when it repeats them. `patient` is `subject.where(resolve() is Patient)`:
    the subject rows whose target is a Patient; `combo-code` is `code | component-code`: both sets of rows.
    The repeats were a fifth of the index rows of a MIMIC load, all written and indexed twice."""
    indexed = params_for(resource_type).items()
    params = {n: p for n, p in indexed if not p.unsupported and n not in ROW_COLUMNS}
    param = params.get(name)
    if param is None:
        return ((name, None),)
    branches = frozenset(param.paths)
    if param.type == "reference" and all(steps and steps[-1][0] == "r" for steps, _ in branches):
        targets = {steps[-1][1] for steps, _ in branches}
        unfiltered = frozenset((steps[:-1], ftype) for steps, ftype in branches)
        for other, p in params.items():
            if len(targets) == 1 and p.type == param.type and frozenset(p.paths) == unfiltered:
                return ((other, next(iter(targets))),)
    parts = [
        other
        for other, p in params.items()
        if other != name and p.type == param.type and frozenset(p.paths) < branches
    ]
    covered = parts and frozenset().union(*(frozenset(params[o].paths) for o in parts)) == branches
    if covered and all(stored_as(resource_type, o) == ((o, None),) for o in parts):
        return tuple((o, None) for o in parts)
    return ((name, None),)


@cache
def pairs_stored_as(resource_type: str, name: str) -> str:
    """The composite whose per-element rows answer `name`'s element branches: the first by name with the same
    element spec, so the rows are written once (component-code-value-quantity reads combo-…'s)."""
    elements = params_for(resource_type)[name].elements
    same = [p.name for p in params_for(resource_type).values()
            if p.type == "composite" and not p.unsupported and p.elements == elements]
    return min(same, default=name)


def resource_types() -> list[str]:
    return list(_table()["resources"])


def get_param(resource_type: str, name: str) -> SearchParam | None:
    """A supported parameter, or None."""
    param = params_for(resource_type).get(name)
    return param if param and not param.unsupported else None


FILTER_COMMON = frozenset({"_id", "_lastUpdated", "_tag", "_profile", "_security", "_source"})


def filterable(resource_type: str, name: str) -> bool:
    """Whether `name` (with or without a `:modifier`) is a search parameter this server matches a type
    by: what a search-parameter filter may use (SMART v2 scope constraints, Bulk Data `_typeFilter`). Result
    parameters (`_include`, `_sort`, `_count` …) and chains are not filters."""
    base = name.split(":", 1)[0]
    return base in FILTER_COMMON or get_param(resource_type, base) is not None


def supported_search_params(resource_type: str) -> list[tuple[str, str, str]]:
    """(name, type, documentation) of every parameter search implements (for the CapabilityStatement)."""
    return [
        (p.name, p.type, p.documentation) for p in params_for(resource_type).values() if not p.unsupported
    ]


@cache
def patient_compartment() -> dict[str, tuple[str, ...]]:
    """Resource type -> the reference parameters that put a resource in a Patient's compartment."""
    return {t: tuple(ps) for t, ps in _table()["patient_compartment"].items()}
