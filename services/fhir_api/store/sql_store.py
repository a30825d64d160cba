"""SqlResourceStore: the ResourceStore contract on SQLAlchemy 2 (SQLite and PostgreSQL).

Writes: one fhir_version row (raw JSON, meta.versionId/lastUpdated set here), the fhir_resource current row,
and its index rows, in one transaction. Sessions write rows with their own session key (copy-on-write: the
shared row is never copied, only shadowed). What a context sees is store/asof.py; what it is served of
a shared resource in a clocked session is its as-of view (store/views.py), on every read path here.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TypeVar

import psycopg
from sqlalchemy import (
    Connection,
    Engine,
    and_,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.exc import DBAPIError, IntegrityError

from foundation.db import SQLITE_BEGIN
from services.fhir_api import json_numbers
from services.fhir_api.search import registry
from services.fhir_api.store import engine as search_engine
from services.fhir_api.store import models as m
from services.fhir_api.store.asof import version_scope, visible_row
from services.fhir_api.store.async_reads import AsyncReader, LoopReads
from services.fhir_api.store.connections import bounded, connection_lost, prepare_engine, rows_of
from services.fhir_api.store.everything import everything
from services.fhir_api.store.indexing import index_resource, unindex
from services.fhir_api.store.interface import (
    ChangeListener,
    Conflict,
    Context,
    Cursor,
    Gone,
    InvalidResource,
    MultipleMatches,
    NotFound,
    ResourceChange,
    SearchRequest,
    SearchResult,
    StoredResource,
    VersionConflict,
)
from services.fhir_api.store.rows import (
    CURRENT,
    hidden_keys,
    index_clinical_time,
    instant,
    now_ms,
    readable,
    stored_resource,
)
from services.fhir_api.store.sessions import SessionRows
from services.fhir_api.store.timing import settle_times
from services.fhir_api.store.validation import validate_resource
from services.fhir_api.store.views import present

T = TypeVar("T")


class SqlResourceStore(SessionRows, LoopReads):
    def __init__(
        self,
        engine: Engine,
        *,
        validate: bool = True,
        query_timeout_ms: int | None = None,
        _conn: Connection | None = None,
        _listeners: list[ChangeListener] | None = None,
    ) -> None:
        """`query_timeout_ms` bounds every statement (503 QueryTimeout past it); set once per engine."""
        self.engine, self.validate, self.timeout_ms = engine, validate, query_timeout_ms
        self._bound = _conn
        self._reader = prepare_engine(engine, query_timeout_ms)
        reads_on_loop = self._reader is not None and _conn is None
        self._async = AsyncReader(engine, query_timeout_ms) if reads_on_loop else None
        self._listeners: list[ChangeListener] = _listeners if _listeners is not None else []

    # -- plumbing ------------------------------------------------------------------------------------------
    @staticmethod
    def supported_search_params(resource_type: str) -> list[tuple[str, str, str]]:
        return registry.supported_search_params(resource_type)

    def add_change_listener(self, listener: ChangeListener) -> None:
        self._listeners.append(listener)

    @contextmanager
    def _conn(self, write: bool = False) -> Iterator[Connection]:
        if self._bound is not None:
            yield self._bound
            return
        if not write and self._reader is not None:
            with bounded(self.timeout_ms), self._reader.connect() as conn:
                yield conn
            return
        with bounded(self.timeout_ms), self.engine.connect() as conn:
            if conn.dialect.name == "sqlite":  # SQLAlchemy begins it: SAVEPOINTs (foundation/db.py)
                conn.info[SQLITE_BEGIN] = "BEGIN IMMEDIATE" if write else "BEGIN"
            with conn.begin():
                yield conn

    def _reading(self, op: Callable[[Connection], T]) -> T:
        """Run a read-only operation. On PostgreSQL its pooled connection is not pinged first (a round trip
        per request): if the server dropped it, the operation runs once more on a fresh pool."""
        if self._bound is not None or self._reader is None:
            with self._conn() as conn:
                return op(conn)
        try:
            with bounded(self.timeout_ms), self._reader.connect() as conn:
                return op(conn)
        except (DBAPIError, psycopg.OperationalError) as exc:
            if not connection_lost(exc):
                raise
        self._reader.dispose()
        with bounded(self.timeout_ms), self._reader.connect() as conn:
            return op(conn)

    @contextmanager
    def transaction(self, ctx: Context) -> Iterator[SqlResourceStore]:
        if self._bound is not None:
            with self._bound.begin_nested():
                yield self
            return
        with self._conn(write=True) as conn:
            yield SqlResourceStore(
                self.engine,
                validate=self.validate,
                query_timeout_ms=self.timeout_ms,
                _conn=conn,
                _listeners=self._listeners,
            )

    # -- reads ------------------------------------------------------------------------------------------
    def _current(
        self, conn: Connection, ctx: Context, rtype: str, rid: str, *, with_deleted: bool = True, raw=False
    ):
        """The row the context sees for type/id (own session row first), clock applied to shared rows.
        With `raw`, the current version's raw JSON and method come along (one query for a read)."""
        session = ctx.session_key
        values = {"rtype": rtype, "rid": rid, "session": session}
        rows = rows_of(conn, CURRENT[raw, bool(session)], values, prepare=True)  # by key: one plan fits all
        return visible_row(rows, ctx, with_deleted)

    def present(
        self, ctx: Context, items: list[StoredResource], seen: frozenset[tuple[str, str]] = frozenset()
    ) -> list[StoredResource]:
        """What the context is served of these resources (views.present: as-of views, hidden references)."""
        if ctx.now is None or not items:
            return items
        return present(
            ctx, items, lambda keys: self._reading(lambda conn: hidden_keys(conn, ctx, keys)), seen
        )

    def present_result(self, ctx: Context, result: SearchResult) -> SearchResult:
        if ctx.now is not None and (result.matches or result.includes):
            items = [*result.matches, *result.includes]
            # a search returns only rows the context sees: references among them need no lookup
            served = self.present(ctx, items, frozenset((i.resource_type, i.id) for i in items))
            result.matches, result.includes = served[: len(result.matches)], served[len(result.matches) :]
        return result

    def read(self, ctx: Context, resource_type: str, id: str) -> StoredResource:
        row = self._reading(lambda conn: self._current(conn, ctx, resource_type, id, raw=True))
        return self.present(ctx, [readable(row, resource_type, id)])[0]

    def vread(self, ctx: Context, resource_type: str, id: str, version_id: int) -> StoredResource:
        found = self._reading(lambda conn: self._vread(conn, ctx, resource_type, id, version_id))
        return self.present(ctx, [found])[0]

    def _vread(
        self, conn: Connection, ctx: Context, resource_type: str, id: str, version_id: int
    ) -> StoredResource:
        row = self._current(conn, ctx, resource_type, id)
        if row is None:
            raise NotFound(f"{resource_type}/{id} not found")
        v = m.version
        found = conn.execute(
            select(v)
            .where(
                v.c.res_type == resource_type,
                v.c.res_id == id,
                v.c.version == version_id,
                v.c.session.in_({ctx.session_key, m.SHARED_RECORD}),
            )
            .order_by(v.c.session.desc())
        ).first()
        if found is None:
            raise NotFound(f"{resource_type}/{id}/_history/{version_id} not found")
        stored = stored_resource(found)
        if stored.deleted:
            raise Gone(f"{resource_type}/{id}/_history/{version_id} is a deletion")
        return stored

    def history(
        self,
        ctx: Context,
        resource_type: str | None,
        id: str | None,
        *,
        since: datetime | None = None,
        count: int = 20,
        offset: int = 0,
        snapshot: int | None = None,
    ) -> tuple[list[StoredResource], int, int]:
        v, r = m.version, m.resource.alias("r")
        stmt = select(v).join(
            r, and_(r.c.res_type == v.c.res_type, r.c.res_id == v.c.res_id, r.c.session == v.c.session)
        )
        stmt = stmt.where(version_scope(v, r, ctx))
        if resource_type:
            stmt = stmt.where(v.c.res_type == resource_type)
        if id:
            stmt = stmt.where(v.c.res_id == id)
        if since is not None:
            stmt = stmt.where(v.c.last_updated >= since)
        if snapshot is not None:  # later pages: the versions there were at the first (new ones come first)
            stmt = stmt.where(v.c.seq <= snapshot)

        def page(conn: Connection) -> tuple[int, int, list]:
            if id and resource_type and self._current(conn, ctx, resource_type, id) is None:
                raise NotFound(f"{resource_type}/{id} not found")
            found = stmt.subquery()
            total, newest = conn.execute(select(func.count(), func.max(found.c.seq))).one()
            rows = conn.execute(stmt.order_by(v.c.seq.desc()).limit(count).offset(offset)).all()
            return total, newest or 0, rows

        total, newest, rows = self._reading(page)
        served = self.present(ctx, [stored_resource(x) for x in rows])
        return served, total, snapshot if snapshot is not None else newest

    def search(self, ctx: Context, request: SearchRequest) -> SearchResult:
        found = self._reading(lambda conn: search_engine.search(conn, ctx, request))
        return self.present_result(ctx, found)

    def everything(
        self,
        ctx: Context,
        patient_id: str,
        *,
        since: datetime | None = None,
        types: list[str] | None = None,
        count: int = 100,
        offset: int = 0,
        cursor: Cursor | None = None,
        total: str = "none",
        snapshot: int | None = None,
    ) -> SearchResult:
        walk = (since, types, count, offset, cursor, total, snapshot)
        found = self._reading(lambda conn: everything(conn, ctx, patient_id, *walk))
        return self.present_result(ctx, found)

    # -- writes ------------------------------------------------------------------------------------------
    def create(self, ctx: Context, resource: dict, *, id: str | None = None) -> StoredResource:
        rtype = self._check(resource)
        new_id = id or str(uuid.uuid4())
        with self._conn(write=True) as conn:
            if id is not None and self._current(conn, ctx, rtype, new_id) is not None:
                raise Conflict(f"{rtype}/{new_id} already exists")
            return self._write(conn, ctx, rtype, new_id, resource, "POST", None)

    def update(
        self, ctx: Context, resource_type: str, id: str, resource: dict, *, if_match: int | None = None
    ) -> tuple[StoredResource, bool]:
        rtype = self._check(resource)
        if rtype != resource_type:
            raise InvalidResource(f"resourceType {rtype} does not match {resource_type}")
        if resource.get("id") not in (None, id):
            raise InvalidResource(f"resource id '{resource.get('id')}' does not match '{id}'")
        with self._conn(write=True) as conn:
            current = self._current(conn, ctx, rtype, id)
            live = current is not None and not current.deleted
            if if_match is not None and (not live or current.version != if_match):
                raise VersionConflict(f"{rtype}/{id} is not at version {if_match}")
            stored = self._write(conn, ctx, rtype, id, resource, "PUT", current)
        return stored, not live

    def conditional_create(
        self, ctx: Context, resource: dict, criteria: list[tuple[str, str]]
    ) -> tuple[StoredResource, bool]:
        rtype = self._check(resource)
        with self._conn(write=True) as conn:
            found = self._match(conn, ctx, rtype, criteria)
            if len(found) > 1:
                raise MultipleMatches(f"{len(found)} {rtype} resources match the criteria")
            if found:
                return found[0], False
            return self._write(conn, ctx, rtype, str(uuid.uuid4()), resource, "POST", None), True

    def conditional_update(
        self, ctx: Context, resource_type: str, resource: dict, criteria: list[tuple[str, str]]
    ) -> tuple[StoredResource, bool]:
        found = self._reading(lambda conn: self._match(conn, ctx, resource_type, criteria))
        if len(found) > 1:
            raise MultipleMatches(f"{len(found)} {resource_type} resources match the criteria")
        if found:
            return self.update(ctx, resource_type, found[0].id, resource)
        return self.update(ctx, resource_type, resource.get("id") or str(uuid.uuid4()), resource)

    def delete(self, ctx: Context, resource_type: str, id: str) -> StoredResource | None:
        with self._conn(write=True) as conn:
            current = self._current(conn, ctx, resource_type, id)
            if current is None or current.deleted:
                return None
            return self._write(conn, ctx, resource_type, id, None, "DELETE", current)

    def _match(self, conn: Connection, ctx: Context, rtype: str, criteria) -> list[StoredResource]:
        if not criteria:
            raise InvalidResource("conditional operation without criteria")
        request = SearchRequest(rtype, list(criteria), count=2, strict=True)
        return search_engine.search(conn, ctx, request).matches

    def _check(self, resource: dict) -> str:
        if not isinstance(resource, dict) or not isinstance(resource.get("resourceType"), str):
            raise InvalidResource("body is not a FHIR resource (no resourceType)")
        if self.validate:
            validate_resource(resource)
        return resource["resourceType"]

    def _write(
        self,
        conn: Connection,
        ctx: Context,
        rtype: str,
        rid: str,
        resource: dict | None,
        method: str,
        current,
    ) -> StoredResource:
        session = ctx.session_key
        version = (current.version + 1) if current is not None else 1
        when = now_ms()
        raw = None
        if resource is not None:
            resource = {**resource, "id": rid}
            resource["meta"] = {
                **(resource.get("meta") or {}),
                "versionId": str(version),
                "lastUpdated": instant(when),
            }
            raw = json_numbers.dumps(resource)  # decimals keep their written precision
        deleted = resource is None
        try:
            with conn.begin_nested():
                key = dict(session=session, res_type=rtype, res_id=rid)
                seq = conn.execute(
                    insert(m.version)
                    .values(
                        **key, version=version, last_updated=when, method=method, deleted=deleted, raw=raw
                    )
                    .returning(m.version.c.seq)
                ).scalar_one()
                values = dict(
                    version=version,
                    seq=seq,
                    last_updated=when,
                    deleted=deleted,
                    clinical_time=index_clinical_time(resource),
                )
                own = current if current is not None and current.session == session else None
                if own is not None:
                    unindex(conn, [own.rid])
                    conn.execute(update(m.resource).where(m.resource.c.rid == own.rid).values(**values))
                    row_id = own.rid
                else:
                    created = current.created_seq if current is not None else seq
                    row_id = conn.execute(
                        insert(m.resource)
                        .values(**key, created_seq=created, **values)
                        .returning(m.resource.c.rid)
                    ).scalar_one()
                if resource is not None:
                    index_resource(conn, row_id, resource, timed=not session)
                    if not session:  # inherited clinical time, references dated by their targets
                        settle_times(conn, [row_id], {rtype})
        except IntegrityError as exc:
            raise Conflict(f"{rtype}/{rid} was changed concurrently; retry") from exc
        action = "deleted" if deleted else ("created" if current is None or current.deleted else "updated")
        change = ResourceChange(action, rtype, rid, version, ctx.session_id)
        for listener in self._listeners:
            listener(conn, change)
        return StoredResource(rtype, rid, version, when, raw or b"", deleted, method, session)
