"""`SessionView`: what every turn of one session shares under v3 (and, extended, v4) — subject names, the
values the record knew at the clock, the write matching, and which responses reached the assistant. Apart from
the scorer so the checks that take a view (v3/cited.py) need not import the scorer that runs them."""

from __future__ import annotations

from contracts.scenario import Scenario
from contracts.trajectory import Trajectory, TrajectoryTurn
from services.consumers.scoring.check_inputs import FinalState, known_until
from services.consumers.scoring.v3.subjects import subject_names, subject_of
from services.consumers.scoring.v3.writes import match_writes


class SessionView:
    """What every turn of one session shares: subject names, known values, the write matching, grounding."""

    def __init__(self, scenario: Scenario, log: Trajectory, state: FinalState) -> None:
        self.scenario, self.log, self.state = scenario, log, state
        self.names = subject_names(scenario)
        known = known_until(state.record_values, scenario.now)  # shared by the sessions of one record
        self.known = {code: list(pairs) for code, pairs in known.items()}
        self.fact_values: dict[str, list[tuple[float, str | None]]] = {}
        for turn in scenario.turns:
            for fact in turn.facts:
                if isinstance(fact.value, int | float) and not isinstance(fact.value, bool):
                    self.fact_values.setdefault(subject_of(fact), []).append((float(fact.value), fact.unit))
        for key, values in self.fact_values.items():
            self.known.setdefault(key, []).extend(values)
        self.matching = match_writes(scenario, state.current())
        calls = [c for t in log.turns.values() for c in t.ehr]
        self.grounding = any(c.resources is not None for c in calls)

    def given(self, turn_log: TrajectoryTurn) -> dict[str, int]:
        """Resource -> position of the first response that gave it to the assistant, up to this answer."""
        limit = turn_log.answer_position if turn_log.answer_position is not None else float("inf")
        out: dict[str, int] = {}
        for index in sorted(self.log.turns):
            if index > turn_log.index:
                break
            for call in self.log.turns[index].ehr:
                if call.position < limit and call.succeeded:
                    for ref in call.resources or ():
                        out.setdefault(ref, call.position)
        return out
