"""The FHIR resource store: SQL storage, sessions, and every read of it: search, $everything, the as-of rule
(see README.md)."""

from __future__ import annotations

from services.fhir_api.store.interface import ResourceStore


def open_store(
    database_url: str, *, validate: bool = True, query_timeout_ms: int | None = None
) -> ResourceStore:
    """A SqlResourceStore on `database_url` (runs no migrations; call rounds.migrate.upgrade first).
    `query_timeout_ms` bounds every statement of the store (the served API: ROUNDS_QUERY_TIMEOUT_MS)."""
    from foundation.db import make_engine
    from services.fhir_api.store.sql_store import SqlResourceStore

    kwargs = {}
    if database_url.startswith("postgresql+psycopg"):
        # no server-side prepared statements: their generic plans ignore how selective a patient id is
        # (a 100 ms search turned into 30 s after five executions)
        kwargs["connect_args"] = {"prepare_threshold": None}
    engine = make_engine(database_url, **kwargs)
    return SqlResourceStore(engine, validate=validate, query_timeout_ms=query_timeout_ms)


__all__ = ["open_store", "ResourceStore"]
