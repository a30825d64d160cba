"""Row-level helpers of SqlResourceStore: the prebuilt current-row statements (which of their rows a context
sees: store/visibility.py), stored-row conversion and the millisecond clock stamped into meta.lastUpdated."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import bindparam, select

from services.fhir_api.search.engine import aware
from services.fhir_api.store import models as m
from services.fhir_api.store.interface import Context, Gone, NotFound, StoredResource


def now_ms() -> datetime:
    moment = datetime.now(UTC)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def instant(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def current_statement(raw: bool, in_session: bool):
    """The row(s) of type/id a context may see (the shared one, and its own in a session), by bound values."""
    r = m.resource
    stmt = select(r)
    if raw:
        stmt = select(r, m.version.c.raw, m.version.c.method).join(m.version, m.version.c.seq == r.c.seq)
    scope = r.c.session.in_((bindparam("session"), "")) if in_session else r.c.session == ""
    stmt = stmt.where(r.c.res_type == bindparam("rtype"), r.c.res_id == bindparam("rid"), scope)
    stmt.compile()
    return stmt


# Built once (a read runs the same statement with its own values: building it cost more than running it) and
# compiled at import, so the server's threads never race to set up its lazily built parts.
CURRENT = {
    (raw, in_session): current_statement(raw, in_session)
    for raw in (False, True)
    for in_session in (False, True)
}


def index_clinical_time(resource: dict | None) -> int | None:
    from services.fhir_api.search.scope import clinical_time

    return clinical_time(resource) if resource is not None else None


def stored_resource(row) -> StoredResource:
    return StoredResource(
        row.res_type,
        row.res_id,
        row.version,
        aware(row.last_updated),
        bytes(row.raw or b""),
        row.deleted,
        row.method,
        row.session,
    )


def readable(row, resource_type: str, id: str) -> StoredResource:
    if row is None:
        raise NotFound(f"{resource_type}/{id} not found")
    if row.deleted:
        raise Gone(f"{resource_type}/{id} was deleted")
    return stored_resource(row)


SESSION = select(m.session).where(m.session.c.id == bindparam("sid"))
SESSION.compile()


def session_context(row) -> Context | None:
    if row is None:
        return None
    return Context(session_id=row.id, now=aware(row.now) if row.now is not None else None)
