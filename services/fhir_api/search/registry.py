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
            tuple(
                (tuple(tuple(s) if s[0] != "c" else (s[0], s[1], tuple(s[2])) for s in p["steps"]), p["type"])
                for p in e["paths"]
            ),
            e.get("unsupported"),
        )
        for name, e in raw.items()
    }


def resource_types() -> list[str]:
    return list(_table()["resources"])


def get_param(resource_type: str, name: str) -> SearchParam | None:
    """A supported parameter, or None."""
    param = params_for(resource_type).get(name)
    return param if param and not param.unsupported else None


def supported_search_params(resource_type: str) -> list[tuple[str, str, str]]:
    """(name, type, documentation) of every parameter search implements (for the CapabilityStatement)."""
    return [
        (p.name, p.type, p.documentation) for p in params_for(resource_type).values() if not p.unsupported
    ]


@cache
def patient_compartment() -> dict[str, tuple[str, ...]]:
    """Resource type -> the reference parameters that put a resource in a Patient's compartment."""
    return {t: tuple(ps) for t, ps in _table()["patient_compartment"].items()}
