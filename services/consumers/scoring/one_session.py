"""Score one session from its events with the current scorer version — the entry point for callers outside
the consumer group (an Inspect AI task, a notebook): no database, no broker.

    score_events(events, scenario=None, state=None, version=None) -> SessionScore

`events` are the session's CloudEvents (dicts as published, or `CloudEvent`s) or `LoggedEvent`s, in log
order. `scenario` defaults to the `scenarioDefinition` of its `rounds.session.started`; `state` (the
sandbox's final state) defaults to the session's `rounds.sandbox.state` event, else to its writes replayed
from the log (replay.py; without the shared record's values: the future-value gate then sees none). A log
recording no EHR exchange at all (not the FHIR server's) shows nothing of the writes: the state is then
empty for a scenario that expects none, and the session unscorable otherwise. The score is the same
SessionScore `rounds score` stores.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from contracts.scenario import Scenario
from contracts.score import SessionScore
from contracts.trajectory import Trajectory
from contracts.trajectory_log import LoggedEvent, build_trajectory
from events.payloads import SandboxState
from services.consumers.scoring import replay
from services.consumers.scoring.check_inputs import FinalState
from services.consumers.scoring.scenarios import scenario_of
from services.consumers.scoring.scorer import SCORER_VERSION, Judge, score_session

EHR_PREFIX = "rounds.ehr."

StateOf = Callable[[Trajectory, Scenario | None], FinalState | None]
"""How a caller obtains the sandbox's final state for a session (its sandbox over FHIR, the log's recorded
state, the writes replayed): each entry point has its own source, the path to the score is shared."""


def _logged(event: Any) -> tuple[LoggedEvent, str | None]:
    if isinstance(event, LoggedEvent):
        return event, None
    data = event if isinstance(event, dict) else event.model_dump(mode="json", by_alias=True)
    return LoggedEvent(data["type"], data.get("data") or {}, data.get("time")), data.get("subject")


class LoggedScore(NamedTuple):
    """A score with the trajectory and state it was computed from (the consumer stores all three)."""

    log: Trajectory
    state: FinalState | None
    score: SessionScore


def score_trajectory(session_id: str, logged: list[LoggedEvent], stored: Mapping[str, bytes | str],
                     state_of: StateOf, scenario: Scenario | None = None, version: str | None = None,
                     judge: Judge | None = None, scenarios: dict[str, Scenario] | None = None,
                     ) -> LoggedScore:
    """events -> trajectory -> score, the one path of every entry point (the consumer's projection, `rounds
    score`, Inspect, score_events): the trajectory carries the whole texts, resource lists and bodies of
    `stored` (reference -> bytes or text, the blobs of values too large for their events), the scenario
    defaults to the log's (by id in `scenarios` when given), and `state_of` is asked for the final state
    once both are known."""
    texts = {ref: body.decode(errors="replace") if isinstance(body, bytes) else body
             for ref, body in stored.items()}
    log = build_trajectory(session_id, logged, texts)
    scenario = scenario or scenario_of(log.started, scenarios)
    state = state_of(log, scenario)
    return LoggedScore(log, state, score_session(log, scenario, state, judge, version or SCORER_VERSION))


def score_logged(session_id: str, logged: list[LoggedEvent], stored: Mapping[str, bytes | str],
                 state_of: StateOf, scenario: Scenario | None = None, version: str | None = None,
                 judge: Judge | None = None, scenarios: dict[str, Scenario] | None = None) -> SessionScore:
    """`score_trajectory`'s score alone."""
    return score_trajectory(session_id, logged, stored, state_of, scenario, version, judge, scenarios).score


def score_events(events: Iterable[Any], scenario: Scenario | None = None, state: FinalState | None = None,
                 version: str | None = None, stored: Mapping[str, bytes] | None = None) -> SessionScore:
    """One session's events -> its SessionScore under `version` (default: SCORER_VERSION); `stored`: the
    blobs (reference -> bytes) of a state or bodies too large for their events."""
    pairs = [_logged(e) for e in events]
    logged = [event for event, _ in pairs]
    subject = next((s for _, s in pairs if s), None)

    def state_of(_log: Trajectory, found: Scenario | None) -> FinalState | None:
        found_state = state
        if found_state is None and any(e.type == SandboxState.TYPE or e.type.startswith(EHR_PREFIX)
                                       for e in logged):
            found_state = replay.state_of_log(logged, stored)
        if found_state is None and found is not None and not any(t.writes for t in found.turns):
            found_state = FinalState()  # nothing to write: the log alone decides
        return found_state

    return score_logged(subject or "session", logged, stored or {}, state_of, scenario, version)
