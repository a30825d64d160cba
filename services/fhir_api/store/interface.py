"""The contract between the FHIR HTTP layer (services/fhir_api/http) and the resource store.

The store knows nothing of HTTP; the HTTP layer knows nothing of SQL. Both sides code against this module.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, NamedTuple, Protocol

from sqlalchemy import Connection

from events.payloads.outcome import SHARED_RECORD


@dataclass(frozen=True)
class Context:
    """Who is asking.

    session_id None is the shared record (`/fhir`). A session sees the shared record overlaid with its own
    copy-on-write writes, and, when `now` is set, only resources whose clinical time is <= now.
    """

    session_id: str | None = None
    now: datetime | None = None
    ended: bool = field(default=False, compare=False)  # the session ended: its FHIR base answers no more

    @property
    def session_key(self) -> str:
        """The `session` of the rows this context writes and reads first (SHARED_RECORD without a session)."""
        return self.session_id or SHARED_RECORD


@dataclass(frozen=True)
class StoredResource:
    resource_type: str
    id: str
    version_id: int
    last_updated: datetime
    raw: bytes  # the JSON as stored and served byte-for-byte (meta.versionId / meta.lastUpdated set on write)
    deleted: bool = False
    method: Literal["POST", "PUT", "DELETE", "PATCH"] = "PUT"  # how this version was made (for _history)
    session: str = SHARED_RECORD  # the session whose row this is (as-of views apply to the shared record's)
    # The current row's key in fhir_resource when the store knows it (search results): includes follow a
    # page's references from these rows instead of looking the page up again by type and id.
    rid: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class ResourceChange:
    """Handed to change listeners inside the write transaction (the outbox hooks in here)."""

    action: Literal["created", "updated", "deleted"]
    resource_type: str
    id: str
    version_id: int
    session_id: str | None


ChangeListener = Callable[[Connection, ResourceChange], None]


class Cursor(NamedTuple):
    """Where a keyset page starts: strictly after (before) the row with these sort-key values, then rid
    (store/cursor.py)."""

    direction: Literal["after", "before"]
    values: tuple


@dataclass
class SearchRequest:
    resource_type: str | None  # None = system-level search
    params: list[tuple[str, str]]  # raw (name[:modifier], value) pairs, results params (_count ...) included
    count: int = 20
    offset: int = 0
    total: Literal["none", "estimate", "accurate"] = "none"
    strict: bool = False  # Prefer: handling=strict -> unknown parameters raise InvalidSearch
    snapshot: int | None = None  # change-sequence cutoff so paging is stable under concurrent writes
    cursor: Cursor | None = None  # keyset paging: continue from where the previous page ended


@dataclass
class SearchResult:
    matches: list[StoredResource]
    includes: list[StoredResource] = field(default_factory=list)
    total: int | None = None
    used_params: list[tuple[str, str]] = field(default_factory=list)  # what was applied (for the self link)
    has_next: bool = False
    snapshot: int | None = None  # to pass back on the next page
    has_previous: bool = False
    first_cursor: str | None = None  # keyset position of the first / last match (for previous / next links)
    last_cursor: str | None = None


class StoreError(Exception):
    """Base of errors the HTTP layer turns into OperationOutcome."""

    status = 400
    code = "processing"


class NotFound(StoreError):
    status, code = 404, "not-found"


class Gone(StoreError):
    status, code = 410, "deleted"


class VersionConflict(StoreError):
    status, code = 412, "conflict"


class Conflict(StoreError):
    status, code = 409, "conflict"


class MultipleMatches(StoreError):
    status, code = 412, "multiple-matches"


class InvalidResource(StoreError):
    status, code = 422, "invalid"

    def __init__(self, message: str, issues: list[str] | None = None) -> None:
        super().__init__(message)
        self.issues = issues or [message]


class InvalidSearch(StoreError):
    status, code = 400, "invalid"


class QueryTimeout(StoreError):
    """A statement ran past the store's query timeout and was stopped (the server stays responsive)."""

    status, code = 503, "timeout"


class StoreUnavailable(StoreError):
    """The database did not answer (connection refused or lost, pool exhausted, too many clients, SQLite
    busy): the request may succeed later. Never reported as "not found": a client that took a 404 for a
    session's sandbox as final (a scorer) would act on something that exists."""

    status, code = 503, "transient"


class ResourceStore(Protocol):
    def add_change_listener(self, listener: ChangeListener) -> None: ...

    def transaction(self, ctx: Context) -> AbstractContextManager[ResourceStore]:
        """All writes made through the returned store commit together or not at all."""
        ...

    def create(self, ctx: Context, resource: dict, *, id: str | None = None) -> StoredResource: ...

    def conditional_create(
        self, ctx: Context, resource: dict, criteria: list[tuple[str, str]]
    ) -> tuple[StoredResource, bool]:
        """(resource, created). 0 matches -> create; 1 -> return it; >1 -> MultipleMatches."""
        ...

    def read(self, ctx: Context, resource_type: str, id: str) -> StoredResource: ...

    async def read_async(self, ctx: Context, resource_type: str, id: str) -> StoredResource:
        """`read` awaited from the event loop (the HTTP layer's reads)."""
        ...

    async def search_async(self, ctx: Context, request: SearchRequest) -> SearchResult:
        """`search` awaited from the event loop."""
        ...

    async def get_session_async(self, session_id: str) -> Context | None:
        """`get_session` awaited from the event loop (None: no such session; a database that does not
        answer raises QueryTimeout or StoreUnavailable, 503, never None)."""
        ...

    async def close_async(self) -> None:
        """Release what the running event loop holds (app shutdown)."""
        ...

    def vread(self, ctx: Context, resource_type: str, id: str, version_id: int) -> StoredResource: ...

    def update(
        self, ctx: Context, resource_type: str, id: str, resource: dict, *, if_match: int | None = None
    ) -> tuple[StoredResource, bool]:
        """(resource, created). Update-as-create is allowed. if_match mismatch -> VersionConflict."""
        ...

    def conditional_update(
        self, ctx: Context, resource_type: str, resource: dict, criteria: list[tuple[str, str]]
    ) -> tuple[StoredResource, bool]: ...

    def delete(self, ctx: Context, resource_type: str, id: str) -> StoredResource | None: ...

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
        """(a page of versions, newest first; how many there are; the change sequence they were counted at,
        to pass back as `snapshot` for the next pages so versions written meanwhile do not shift them)"""

    def search(self, ctx: Context, request: SearchRequest) -> SearchResult: ...

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
        total: Literal["none", "estimate", "accurate"] = "none",
        snapshot: int | None = None,
    ) -> SearchResult:
        """The Patient, then its compartment; `includes` = what the page refers to outside what the walk
        delivers (followed on), so every reference resolves within the walk. `total` counted only when
        asked; pass `SearchResult.snapshot` back on later pages."""
        ...

    def session_writes(self, session_id: str) -> list[StoredResource]:
        """The current version of every resource the session created, updated or deleted (tombstones
        included), in write order: the sandbox's final state for scorers."""
        ...

    def drop_session(self, session_id: str) -> None:
        """Discard every write of one session (DELETE /sessions/<id>)."""
        ...

    def end_session(self, session_id: str) -> bool:
        """Close a session (POST /sessions/<id>/$end): its FHIR base, and so its token, refuse every request
        from now on, while its writes stay for the scorer. False when there is no such session."""
        ...
