"""The scorer's tables. Score tables are shared by every consumer group (versions sit beside each other,
keyed by run and scorer version); the event buffers belong to one group (named with its suffix)."""

from __future__ import annotations

from sqlalchemy import Column, Float, Integer, PrimaryKeyConstraint, String, Text
from sqlalchemy.schema import SchemaItem

SHARED_TABLES = ("score_sessions", "score_turns", "score_versions")
BUFFERS = ("scoring_events", "scoring_open")


def _key() -> list[Column]:
    return [Column("run_id", String(200), nullable=False),
            Column("scorer_version", String(64), nullable=False),
            Column("session_id", String(200), nullable=False)]


def schema() -> dict[str, list[SchemaItem]]:
    """Fresh Column objects per table base name (a projection instance owns its own)."""
    return {
        "score_sessions": [
            *_key(), Column("scenario", String(200)), Column("trial", Integer), Column("language", String(8)),
            Column("variant", String(16)), Column("family", String(100)), Column("difficulty", String(8)),
            Column("persona", String(100)), Column("reason", String(40)), Column("excluded", String(40)),
            Column("score", Float), Column("document", Text, nullable=False),
            PrimaryKeyConstraint("run_id", "scorer_version", "session_id"),
        ],
        "score_turns": [
            *_key(), Column("turn", Integer, nullable=False), Column("task_type", String(20)),
            Column("score", Float, nullable=False), Column("checks", Text, nullable=False),
            PrimaryKeyConstraint("run_id", "scorer_version", "session_id", "turn"),
        ],
        "score_versions": [
            Column("run_id", String(200), primary_key=True),
            Column("scorer_version", String(64), primary_key=True),
            Column("first_scored", String(40), nullable=False),
        ],
        "scoring_events": [
            Column("session_id", String(200), nullable=False), Column("position", Integer, nullable=False),
            Column("type", String(100), nullable=False), Column("data", Text, nullable=False),
            Column("time", String(40)), PrimaryKeyConstraint("session_id", "position"),
        ],
        "scoring_open": [
            Column("session_id", String(200), primary_key=True),
            # open | ignored (another run) | scored | waiting (ended, sandbox missing here: for the log's
            # rounds.sandbox.state of it)
            Column("status", String(10), nullable=False),
            Column("next_position", Integer, nullable=False),
        ],
    }
