"""projections: the default consumer group's projection and score tables, created here instead of by the
projection runner (a store made before this revision has them already: those are kept as they are)

Revision ID: 0019_projection_tables
Revises: 0018_auth_oidc
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019_projection_tables"
down_revision = "0018_auth_oidc"
branch_labels = None
depends_on = None

_TEXT = sa.String(length=200)  # ids, event types
_TIME = sa.String(length=40)  # the events' ISO times as written


def _score_key() -> list[sa.Column]:
    return [sa.Column("run_id", _TEXT, nullable=False), sa.Column("scorer_version", sa.String(64), nullable=False),
            sa.Column("session_id", _TEXT, nullable=False)]


def _tables() -> dict[str, list[sa.SchemaItem]]:
    """The tables as the projections declared them at this revision (a later change is a later revision)."""
    return {
        "proj_fhir_changes": [
            sa.Column("session_id", _TEXT, nullable=False),
            sa.Column("resource_type", sa.String(64), nullable=False),
            sa.Column("resource_id", sa.String(64), nullable=False),
            sa.Column("version_id", sa.String(64), nullable=False),
            sa.Column("action", sa.String(16), nullable=False),
            sa.Column("event_id", _TEXT, nullable=False),
            sa.Column("event_time", _TIME),
            sa.PrimaryKeyConstraint("session_id", "resource_type", "resource_id", "version_id",
                                    name=op.f("pk_proj_fhir_changes")),
        ],
        "proj_transcript_sessions": [
            sa.Column("session_id", _TEXT, nullable=False),
            sa.Column("status", sa.String(16), nullable=False),
            sa.Column("started_time", _TIME),
            sa.Column("ended_time", _TIME),
            *(sa.Column(name, sa.Integer(), nullable=False) for name in (
                "entry_count", "message_count", "ehr_request_count", "ehr_response_count", "tool_call_count")),
            sa.Column("last_sequence", sa.BigInteger()),
            sa.PrimaryKeyConstraint("session_id", name=op.f("pk_proj_transcript_sessions")),
        ],
        "proj_transcript_entries": [
            sa.Column("session_id", _TEXT, nullable=False),
            sa.Column("position", sa.Integer(), nullable=False),
            sa.Column("event_id", _TEXT, nullable=False),
            sa.Column("event_type", _TEXT, nullable=False),
            sa.Column("event_time", _TIME),
            sa.Column("sequence", sa.BigInteger()),
            sa.Column("role", sa.String(20)),
            sa.Column("ref", _TEXT),
            sa.Column("text", sa.Text()),
            sa.Column("method", sa.String(10)),
            sa.Column("url", sa.Text()),
            sa.Column("status", sa.Integer()),
            sa.Column("latency_ms", sa.Float()),
            sa.Column("name", _TEXT),
            sa.PrimaryKeyConstraint("session_id", "position", name=op.f("pk_proj_transcript_entries")),
        ],
        "proj_score_sessions": [
            *_score_key(), sa.Column("scenario", _TEXT), sa.Column("trial", sa.Integer()),
            sa.Column("language", sa.String(8)), sa.Column("variant", sa.String(16)),
            sa.Column("family", sa.String(100)), sa.Column("difficulty", sa.String(8)),
            sa.Column("persona", sa.String(100)), sa.Column("reason", sa.String(40)),
            sa.Column("excluded", sa.String(40)), sa.Column("score", sa.Float()),
            sa.Column("document", sa.Text(), nullable=False),
            sa.PrimaryKeyConstraint("run_id", "scorer_version", "session_id", name=op.f("pk_proj_score_sessions")),
        ],
        "proj_score_turns": [
            *_score_key(), sa.Column("turn", sa.Integer(), nullable=False), sa.Column("task_type", sa.String(20)),
            sa.Column("score", sa.Float(), nullable=False), sa.Column("checks", sa.Text(), nullable=False),
            sa.PrimaryKeyConstraint("run_id", "scorer_version", "session_id", "turn",
                                    name=op.f("pk_proj_score_turns")),
        ],
        "proj_score_versions": [
            sa.Column("run_id", _TEXT, nullable=False),
            sa.Column("scorer_version", sa.String(64), nullable=False),
            sa.Column("first_scored", _TIME, nullable=False),
            sa.PrimaryKeyConstraint("run_id", "scorer_version", name=op.f("pk_proj_score_versions")),
        ],
        "proj_scoring_events": [
            sa.Column("session_id", _TEXT, nullable=False),
            sa.Column("position", sa.Integer(), nullable=False),
            sa.Column("type", sa.String(100), nullable=False),
            sa.Column("data", sa.Text(), nullable=False),
            sa.Column("time", _TIME),
            sa.PrimaryKeyConstraint("session_id", "position", name=op.f("pk_proj_scoring_events")),
        ],
        "proj_scoring_open": [
            sa.Column("session_id", _TEXT, nullable=False),
            sa.Column("status", sa.String(10), nullable=False),
            sa.Column("next_position", sa.Integer(), nullable=False),
            sa.PrimaryKeyConstraint("session_id", name=op.f("pk_proj_scoring_open")),
        ],
    }


def upgrade() -> None:
    existing = set(sa.inspect(op.get_bind()).get_table_names())
    for name, items in _tables().items():
        if name not in existing:  # made by the runner before this revision: the same table, kept with its rows
            op.create_table(name, *items)


def downgrade() -> None:
    for name in reversed(list(_tables())):
        op.drop_table(name)
