"""One session's score from Rounds' log, by Rounds' scorer at its current version.

The session's events are read from its partition of `rounds.sessions` (the log `rounds run`, `rounds score`
and `rounds replay` read), read into its Trajectory (with the whole texts of oversized messages) and
scored by one_session.py `score_logged` (the path `score_events` shares) against the scenario its
`rounds.session.started` carries and the sandbox's final
state: read over the FHIR API as the scorer reads it (`ROUNDS_FHIR_BASE`, else an in-process app on the
database), or, where the sandbox does not exist, the `rounds.sandbox.state` the log holds (a large one from
`event_blobs`), else the session's writes replayed from the log. The same log and version give the same
score as the scorer's consumer group (`rounds score`), so an Inspect re-score (`inspect score`) and
`rounds report` agree.
"""

from __future__ import annotations

import atexit
import threading
from dataclasses import dataclass
from typing import Any

from contracts.end_reasons import NOT_ASSISTANT_FAULT
from contracts.scenario import Scenario
from contracts.score import SessionScore
from contracts.trajectory import Trajectory
from contracts.trajectory_log import LoggedEvent
from events.archive import read_log
from events.payloads import SandboxState, SessionStarted
from events.topics import SESSIONS
from rounds.root import Root
from rounds.settings import Settings
from services.consumers.scoring import replay, scorer, snapshot, stored_text
from services.consumers.scoring.check_inputs import FinalState
from services.consumers.scoring.fhir_state import SandboxMissing, StateReader, fhir_client
from services.consumers.scoring.one_session import score_logged

SNAPSHOT = SandboxState.TYPE


class SessionNotLogged(LookupError):
    """The session is not on this Rounds log (another database, or never started): nothing to score."""


@dataclass
class _Reading:
    """A bus and a state reader kept per (database, FHIR base) for the life of the process, on a root of
    their own (its engine, its bus)."""

    root: Root
    reader: StateReader
    lock: threading.Lock

    @property
    def bus(self) -> Any:
        return self.root.bus()

    def close(self) -> None:
        try:
            self.reader.client.close()
        finally:
            self.root.close()


_READINGS: dict[tuple[str, str | None], _Reading] = {}
_GUARD = threading.Lock()


def _reading(settings: Settings) -> _Reading:
    key = (settings.database_url, settings.fhir_base)
    with _GUARD:
        if key not in _READINGS:
            root = Root(settings)
            reader = StateReader(fhir_client(settings, root.engine()))
            _READINGS[key] = _Reading(root, reader, threading.Lock())
        return _READINGS[key]


def close_reading(settings: Settings) -> None:
    """Close what reading this database's log kept open (reopened if scoring needs it again)."""
    with _GUARD:
        reading = _READINGS.pop((settings.database_url, settings.fhir_base), None)
    if reading is not None:
        reading.close()


@atexit.register
def close_readings() -> None:
    with _GUARD:
        for reading in _READINGS.values():
            reading.close()
        _READINGS.clear()


def version() -> str:
    """The scorer version a score made now carries."""
    return scorer.SCORER_VERSION


def session_events(settings: Settings, session_id: str) -> list[LoggedEvent]:
    reading = _reading(settings)
    with reading.lock:
        records = list(read_log(reading.bus, [SESSIONS], session=session_id))
    return [LoggedEvent(r.event.type, r.event.data if isinstance(r.event.data, dict) else {}, r.event.time)
            for r in records if r.event is not None]


def _blobs(settings: Settings, events: list[LoggedEvent]) -> dict[str, bytes]:
    """The stored state, bodies and whole texts the session's events name, from this database's
    `event_blobs`."""
    from events.blobs import read

    refs = replay.body_refs(events) | snapshot.stored_refs(events) | stored_text.refs(events)
    if not refs:
        return {}
    with _reading(settings).root.engine().connect() as conn:  # the reading's engine, kept for the process
        return read(conn, refs)


def score_logged_session(settings: Settings, session_id: str) -> SessionScore:
    """The session's SessionScore (the report's document: turns, checks with evidence, reason)."""
    events = session_events(settings, session_id)
    if not any(e.type == SessionStarted.TYPE for e in events):
        raise SessionNotLogged(f"session {session_id} is not on the Rounds log at {settings.database_url}")
    stored = _blobs(settings, events)

    def state_of(log: Trajectory, found: Scenario | None) -> FinalState | None:
        if found is None or log.reason in NOT_ASSISTANT_FAULT:
            return None
        try:
            return _reading(settings).reader(session_id, found)
        except SandboxMissing:  # the log's recorded state (a stored one from event_blobs), else its replay
            return replay.state_of_log(events, stored, _reading(settings).reader.values_for(found))

    return score_logged(session_id, [e for e in events if e.type != SNAPSHOT], stored, state_of)
