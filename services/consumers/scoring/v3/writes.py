"""Writes matched one to one (v3).

Every expected write of the session is matched to its own resource of the sandbox's final state (a
maximum bipartite matching over "meets every constraint", so one order cannot stand for two), and a resource
whose lists hold conflicting elements fails the constraints on them: several different values where one is
asked (20 doses in one MedicationRequest, 18 lab codes of one system in one ServiceRequest) are no answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from contracts.scenario import ExpectedWrite, FieldConstraint, Scenario
from services.consumers.scoring.check_inputs import Written
from services.consumers.scoring.constraints import satisfied, values_at

WriteKey = tuple[int, int]  # (turn index, write index)


def _codes(value: Any, system: str) -> set[str]:
    codings = value.get("coding", []) if isinstance(value, dict) and "coding" in value else [value]
    return {c.get("code") for c in codings
            if isinstance(c, dict) and (not system or c.get("system") == system)}


def conflicting(resource: dict, constraint: FieldConstraint) -> bool:
    """The path holds several different values where the constraint names one."""
    try:
        values = values_at(resource, constraint.path)
    except ValueError:
        return False
    if constraint.op == "coding":
        system = str(constraint.value).rpartition("|")[0]
        return len(set().union(*(_codes(v, system) for v in values)) if values else set()) > 1
    if constraint.op in ("equals", "approx"):
        plain = [v.get("value") if isinstance(v, dict) else v for v in values]
        distinct = {repr(v).lower() for v in plain if not isinstance(v, dict | list)}
        return len(distinct) > 1
    return False


def failed_constraints(written: Written, expected: ExpectedWrite, now: datetime) -> list[str]:
    failed = []
    resource = written.resource or {}
    for constraint in expected.constraints:
        try:
            ok = satisfied(resource, constraint, now)
        except ValueError as exc:
            failed.append(f"{constraint.path} ({exc})")
            continue
        if not ok:
            failed.append(f"{constraint.path} {constraint.op} {constraint.value!r}")
        elif conflicting(resource, constraint):
            failed.append(f"{constraint.path}: conflicting elements")
    return failed


Failures = Callable[[Written, ExpectedWrite, datetime], list[str]]


def match_writes(scenario: Scenario, current: Sequence[Written], failures: Failures | None = None,
                 ) -> dict[WriteKey, tuple[Written | None, str]]:
    """Each expected write -> (its own resource or None, evidence), by augmenting paths (Kuhn's algorithm;
    sessions hold a handful of writes). `failures`: how a written resource fails an expected write
    (`failed_constraints` by default; scorer v4 also accepts the write's alternatives)."""
    failed_constraints_of = failures or failed_constraints
    expected = [((t.index, i), w) for t in scenario.turns for i, w in enumerate(t.writes)]
    fits: dict[WriteKey, list[int]] = {}
    closest: dict[WriteKey, str] = {}
    for key, write in expected:
        fits[key] = []
        best: list[str] | None = None
        for j, written in enumerate(current):
            if failures is None and written.resource_type != write.resource_type:
                continue  # v4's `failures` judges other types itself (an alternative of another type)
            failed = failed_constraints_of(written, write, scenario.now)
            if not failed:
                fits[key].append(j)
            elif best is None or len(failed) < len(best):
                best, closest[key] = failed, f"closest {written.resource_type}/{written.id} fails: " \
                                             f"{'; '.join(failed)}"
    owner: dict[int, WriteKey] = {}

    def augment(key: WriteKey, seen: set[int]) -> bool:
        for j in fits[key]:
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or augment(owner[j], seen):
                owner[j] = key
                return True
        return False

    for key, _ in expected:
        augment(key, set())
    by_key = {key: j for j, key in owner.items()}
    out: dict[WriteKey, tuple[Written | None, str]] = {}
    for key, write in expected:
        if key in by_key:
            w = current[by_key[key]]
            out[key] = (w, f"{w.resource_type}/{w.id} v{w.version} meets all {len(write.constraints)} "
                           f"constraints (its own match)")
        elif fits[key]:
            out[key] = (None, f"every fitting {write.resource_type} is the match of another expected write")
        else:
            out[key] = (None, closest.get(key, f"no {write.resource_type} in the sandbox's final state"))
    return out
