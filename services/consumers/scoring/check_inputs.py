"""What the checks look at besides the session's trajectory (contracts/trajectory.py): the sandbox's final
state and the shared record's values, the context of one rubric item, and what a check returns. Data only;
fhir_state.py and replay.py read the state, checks/ and each version judge them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from contracts.scenario import RubricItem, Scenario, Turn
from contracts.trajectory import Trajectory, TrajectoryTurn


@dataclass(frozen=True)
class Written:
    """A resource in the session's final state (the current version of something it wrote)."""

    resource_type: str
    id: str
    version: int
    deleted: bool
    method: str
    resource: dict[str, Any] | None


@dataclass(frozen=True)
class RecordValue:
    """A value in the shared record (Observation) for a code a turn's facts name, with its clinical time."""

    code: str
    value: float
    unit: str | None
    time: datetime | None
    reference: str


class SharedValues(list[RecordValue]):
    """Record values that the final states of many sessions share (the recorded states of one patient's
    sessions hold the same results of the shared record): built once, never changed, so what the checks
    derive from them (by code, known by a time) is derived once, not per session and turn."""

    __slots__ = ("_by_code", "_known")

    def __init__(self, values: Iterable[RecordValue]) -> None:
        super().__init__(values)
        self._by_code: dict[str, list[RecordValue]] | None = None
        self._known: dict[datetime, dict[str, list[tuple[float, str | None]]]] = {}


def values_by_code(values: list[RecordValue]) -> dict[str, list[RecordValue]]:
    """The values by code, each code's in their order (of SharedValues: computed once, read it only)."""
    if isinstance(values, SharedValues) and values._by_code is not None:
        return values._by_code
    out: dict[str, list[RecordValue]] = {}
    for value in values:
        out.setdefault(value.code, []).append(value)
    if isinstance(values, SharedValues):
        values._by_code = out
    return out


def known_until(values: list[RecordValue], now: datetime) -> dict[str, list[tuple[float, str | None]]]:
    """(value, unit) by code of the values without a time or at `now` or before (of SharedValues: computed
    once per time, read it only)."""
    if isinstance(values, SharedValues) and now in values._known:
        return values._known[now]
    known: dict[str, list[tuple[float, str | None]]] = {}
    for value in values:
        if value.time is None or value.time <= now:
            known.setdefault(value.code, []).append((value.value, value.unit))
    if isinstance(values, SharedValues):
        values._known[now] = known
    return known


@dataclass
class FinalState:
    writes: list[Written] = field(default_factory=list)
    record_values: list[RecordValue] = field(default_factory=list)  # for no_future_value

    def current(self) -> list[Written]:
        return [w for w in self.writes if not w.deleted and w.resource is not None]


@dataclass(frozen=True)
class CheckContext:
    """Everything a check may look at for one rubric item of one turn."""

    scenario: Scenario
    turn: Turn
    log: TrajectoryTurn
    session: Trajectory
    state: FinalState
    language: str

    @property
    def now(self) -> datetime:
        return self.scenario.now


@dataclass(frozen=True)
class CheckResult:
    passed: bool
    evidence: str
    # figures beside the verdict, copied onto the scored check (a measure kind's value, its breakdown keys)
    measures: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ItemResult:
    item: RubricItem
    result: CheckResult
