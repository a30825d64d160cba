"""The FHIR resource store: SQL storage, sessions, and every read of it: search, $everything, the as-of rule
(see README.md)."""

from __future__ import annotations

from sqlalchemy import Engine

from services.fhir_api.store.interface import ResourceStore


def open_store(
    engine: Engine, *, validate: bool = True, query_timeout_ms: int | None = None
) -> ResourceStore:
    """A SqlResourceStore on the process's `engine` (its schema at head: the composition root migrated it).
    `query_timeout_ms` bounds every statement of the store (the served API: ROUNDS_QUERY_TIMEOUT_MS)."""
    from services.fhir_api.store.sql_store import SqlResourceStore

    return SqlResourceStore(engine, validate=validate, query_timeout_ms=query_timeout_ms)


__all__ = ["open_store", "ResourceStore"]
