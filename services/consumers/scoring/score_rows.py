"""A scored session as a batch's transaction writes it: its score rows and its output events.

The projection builds them in its prefetch, before the batch's transaction opens: serialising a score's
document and checks and validating its `rounds.score.*` events costs about as much CPU as writing them, and
on SQLite the transactions of a re-score's members run one at a time, so what is built outside them runs in
every member at once. `store_scores` writes them (and scores built elsewhere, as rows here).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import Connection, Table, delete, insert, select

from contracts.score import SessionScore
from contracts.trajectory import Trajectory
from events.envelope import CloudEvent
from events.projections.projection import bound_values, bulk_insert, in_bound
from services.consumers.scoring import snapshot
from services.consumers.scoring.check_inputs import FinalState
from services.consumers.scoring.events_out import judge_events, session_event, turn_event
from services.consumers.scoring.scorer import SCORER


@dataclass(frozen=True)
class ScoreRows:
    """The rows of one session's score under one scorer version (`score_sessions` and `score_turns`)."""

    score: SessionScore
    session: dict[str, Any]
    turns: list[dict[str, Any]]


def document_digest(document: str) -> bytes:
    """What identifies a score's stored document (`score_sessions.document`, the score's JSON)."""
    return hashlib.blake2b(document.encode(), digest_size=20).digest()


def rows_of(score: SessionScore, version: str) -> ScoreRows:
    session = {
        "run_id": score.run, "scorer_version": version, "session_id": score.session,
        "scenario": score.scenario, "trial": score.trial, "language": score.language,
        "variant": score.variant, "family": score.family, "difficulty": score.difficulty,
        "persona": score.persona,
        "reason": score.reason, "excluded": score.excluded, "score": score.score,
        "document": score.model_dump_json(),
    }
    turns = [{
        "run_id": score.run, "scorer_version": version, "session_id": score.session, "turn": t.index,
        "task_type": t.task_type, "score": t.score,
        "checks": orjson.dumps([c.model_dump() for c in t.checks]).decode(),
    } for t in score.turns]
    return ScoreRows(score, session, turns)


@dataclass(frozen=True)
class Scored:
    """One session scored for the batch: whether from a live read of its sandbox (else from the state its log
    recorded), the log and score, the rows, and the events to emit as (event, topic)."""

    live: bool
    log: Trajectory
    score: SessionScore
    rows: ScoreRows
    emits: list[tuple[CloudEvent, str]] = field(default_factory=list)


def scored(log: Trajectory, score: SessionScore, state: FinalState | None, *, live: bool, version: str,
           scores_topic: str, sessions_topic: str, store: snapshot.Store | None = None) -> Scored:
    """The rows and events of a session's score: `rounds.score.turn` per reached turn and `.session` on the
    scores topic, and after a live read the `rounds.sandbox.state` it read, for a re-score elsewhere (a
    large state through `store`, the blob store)."""
    events = [turn_event(score, t, log, version, SCORER) for t in score.turns if t.reached]
    events.append(session_event(score, log, version, SCORER))
    events += judge_events(score, log, version)
    emits = [(event, scores_topic) for event in events]
    if live and isinstance(state, FinalState):
        recorded = snapshot.to_event(log.session_id, state, log.ended_time, store)
        if recorded is not None:
            emits.append((recorded, sessions_topic))
    return Scored(live, log, score, rows_of(score, version), emits)


def store_scores(conn: Connection, tables: Mapping[str, Table], version: str,
                 scores: Sequence[SessionScore | ScoreRows]) -> None:
    """Replace the score rows of (run, `version`, session) of each of `scores`."""
    rows = [s if isinstance(s, ScoreRows) else rows_of(s, version) for s in scores]
    sessions, turns, versions = (tables[name] for name in ("score_sessions", "score_turns", "score_versions"))
    dialect = conn.dialect.name
    for run in sorted({r.score.run for r in rows}):
        ids = bound_values(dialect, sorted({r.score.session for r in rows if r.score.run == run}))
        for table in (sessions, turns):
            conn.execute(delete(table).where(table.c.run_id == run, table.c.scorer_version == version,
                                             in_bound(table.c.session_id, dialect, "ids")), {"ids": ids})
        seen = conn.execute(select(versions.c.run_id).where(
            versions.c.run_id == run, versions.c.scorer_version == version)).first()
        if seen is None:
            conn.execute(insert(versions).values(run_id=run, scorer_version=version,
                                                 first_scored=datetime.now(UTC).isoformat()))
    bulk_insert(conn, sessions, [r.session for r in rows])
    bulk_insert(conn, turns, [turn for r in rows for turn in r.turns])
