"""A session's writes: the current version of every resource the session created, updated or deleted.

This is what a scorer checks a sandbox's final state against (path-independent: whatever sequence of calls
left these resources, only the result counts). It reads the session's own rows only (never the shared
record), so it is cheap and independent of the as-of clock: a session always sees its own writes.
"""

from __future__ import annotations

from sqlalchemy import Connection, select

from services.fhir_api.store import models as m
from services.fhir_api.store.interface import StoredResource
from services.fhir_api.store.rows import stored_resource


def session_writes(conn: Connection, session_id: str, limit: int = 10_000) -> list[StoredResource]:
    """Current versions (deletions included, as tombstones) of the session's resources, in write order."""
    if not session_id:
        return []
    r, v = m.resource, m.version
    stmt = (
        select(r.c.res_type, r.c.res_id, r.c.version, r.c.last_updated, r.c.deleted, r.c.session)
        .add_columns(v.c.raw, v.c.method)
        .join(v, v.c.seq == r.c.seq)
        .where(r.c.session == session_id)
        .order_by(r.c.seq)
        .limit(limit)
    )
    return [stored_resource(row) for row in conn.execute(stmt)]
