"""A turn-by-turn comparison of two runs of the same scenarios (e.g. a counterfactual replay vs the original).

Data only; services/consumers/report/compare.py builds it. "before" is the run given with `--run`, "after" the
one given with `--compare`; every delta is after − before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from contracts.score import SessionScore

# improved/regressed/unchanged: both runs scored the turn; only_before/only_after: one run has no such turn;
# excluded: either session ended by an infrastructure or patient error (not the assistant's, never compared)
TurnStatus = Literal["improved", "regressed", "unchanged", "only_before", "only_after", "excluded"]
SessionKey = tuple[str, int, str, str]  # scenario, trial, language, variant ("" when not set)


@dataclass(frozen=True)
class CheckChange:
    id: str
    kind: str
    before: bool | None  # None: the check is not in that run's turn
    after: bool | None


@dataclass(frozen=True)
class TurnDelta:
    index: int
    before: float | None
    after: float | None
    delta: float | None
    status: TurnStatus
    changed_checks: list[CheckChange] = field(default_factory=list)  # checks whose verdict differs


@dataclass(frozen=True)
class SessionPair:
    key: SessionKey
    before: SessionScore | None
    after: SessionScore | None
    turns: list[TurnDelta] = field(default_factory=list)

    @property
    def label(self) -> str:
        scenario, trial, language, variant = self.key
        extra = " ".join(x for x in (language, variant) if x)
        return f"{scenario} #{trial}" + (f" ({extra})" if extra else "")


@dataclass(frozen=True)
class Comparison:
    before_run: str
    after_run: str
    pairs: list[SessionPair]
    turn_counts: dict[str, int]  # status -> turns
