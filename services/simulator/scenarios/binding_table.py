"""The binding kinds a family definition can name, in one table, and the evaluation of a definition's bindings
and requirements at a moment: every kind is listed here explicitly (no module registers kinds as a side
effect of being imported)."""

from __future__ import annotations

from collections.abc import Callable

from services.simulator.scenarios import truth as T
from services.simulator.scenarios.bindings import SINGLE_KINDS, Moment
from services.simulator.scenarios.bindings_combined import COMBINED_KINDS
from services.simulator.scenarios.families import Binding, Require

KINDS: dict[str, Callable[[Binding, Moment], T.Truth]] = {**SINGLE_KINDS, **COMBINED_KINDS}


def _holds(req: Require, truth: T.Truth) -> bool:
    if req.op == "present":
        return truth.present
    if req.op == "absent":
        return not truth.present
    value = truth.extra.get(req.field) if req.field != "value" else truth.value
    if req.op == "in":
        return value in req.value
    if req.op in ("==", "!="):
        return (value == req.value) == (req.op == "==")
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    return {
        ">=": value >= req.value,
        "<=": value <= req.value,
        ">": value > req.value,
        "<": value < req.value,
    }[req.op]


def evaluate(bindings: list[Binding], requires: list[Require], m: Moment) -> bool:
    """Fill m.values binding by binding; False as soon as a requirement (checked once its binding exists)
    fails."""
    pending = list(requires)
    for b in bindings:
        m.values[b.name] = KINDS[b.kind](b, m)
        for req in [r for r in pending if r.name == b.name]:
            if not _holds(req, m.values[b.name]):
                return False
            pending.remove(req)
    return True
