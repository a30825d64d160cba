"""Keyset paging: a page continues from the sort position of the previous page's last (or first) match.

An offset counts rows, so a resource deleted, or updated out of the result, between two page requests shifts
every later row by one and the next page skips one that was never shown. A cursor names a position in the
sort order instead -- the sort keys and the rid (the tie-break) of the row the page ends at -- so a change to
other rows never moves it. (Creates after the first page are hidden anyway by the snapshot the links pin.)
A resource whose own sort key changes between pages can show up on both sides of the cursor or on neither:
the price every keyset-paging server pays.

The cursor travels in the `_after` / `_before` parameter of the next / previous link as base64url JSON of the
key values; it is checked against the search's own sort keys, so a tampered one is a 400, never a 500.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, Literal

import orjson
from sqlalchemy import (
    BigInteger,
    ColumnElement,
    DateTime,
    Float,
    Integer,
    String,
    and_,
    bindparam,
    or_,
    true,
)

from services.fhir_api.store import query as q
from services.fhir_api.store.interface import (
    Context,
    Cursor,
    InvalidSearch,
    ResourceStore,
    SearchRequest,
    SearchResult,
    StoredResource,
)

Direction = Literal["after", "before"]
MAX_CURSOR = 4096  # characters: a few sort keys, each at most an indexed value


def encode(values: tuple) -> str:
    plain = [v.isoformat() if isinstance(v, datetime) else v for v in values]
    return base64.urlsafe_b64encode(orjson.dumps(plain)).rstrip(b"=").decode()


def decode(direction: Direction, text: str) -> Cursor:
    """Only the shape is checked here; `bind_values` checks the values against the search's sort keys."""
    try:
        if len(text) > MAX_CURSOR:
            raise ValueError("too long")
        values = orjson.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        if not isinstance(values, list) or not values:
            raise ValueError("not a list of values")
    except (ValueError, binascii.Error, orjson.JSONDecodeError) as exc:
        raise InvalidSearch(f"_{direction}: not a paging cursor this server made ({exc})") from None
    return Cursor(direction, tuple(values))


def _checked(value: Any, key: ColumnElement, direction: str) -> Any:
    """The value as its column's type, or a 400: a value the database would refuse (an integer beyond int8,
    a NUL character) must never reach it as a server error."""
    if value is None:
        return None
    kind = key.type
    if isinstance(kind, DateTime) and isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            pass
    elif isinstance(kind, BigInteger | Integer) and type(value) is int and abs(value) < 2**62:
        return value
    elif isinstance(kind, Float) and type(value) in (int, float) and math.isfinite(value):
        return float(value)
    elif isinstance(kind, String) and isinstance(value, str) and "\x00" not in value:
        return value
    raise InvalidSearch(f"_{direction}: the cursor does not fit this search's sort")


def fit(cursor: Cursor, size: int) -> None:
    """A cursor holds one value per sort key and the rid."""
    if len(cursor.values) != size:
        raise InvalidSearch(f"_{cursor.direction}: the cursor does not fit this search's sort")


def bind_values(cursor: Cursor, columns: tuple[ColumnElement, ...]) -> dict[str, Any]:
    """The cursor's values by bind name, each checked against its column's type (the sort keys, then rid)."""
    fit(cursor, len(columns))
    return {
        _name(i, len(columns)): _checked(value, column, cursor.direction)
        for i, (value, column) in enumerate(zip(cursor.values, columns, strict=True))
        if value is not None
    }


def nulls(cursor: Cursor | None) -> tuple[bool, ...] | None:
    """Which sort-key values of the cursor are NULL (part of a page statement's shape)."""
    return None if cursor is None else tuple(value is None for value in cursor.values[:-1])


def _name(i: int, n: int) -> str:
    return "cursor_rid" if i == n - 1 else f"cursor_{i}"


def beyond(
    keys: list[tuple[ColumnElement, bool]], rid: ColumnElement, direction: Direction, nulls: tuple[bool, ...]
) -> ColumnElement:
    """Rows strictly after (before) the cursor in the order `keys` then rid ascending, NULLs last: the
    lexicographic comparison spelled out, as keys may be descending or NULL. Which cursor values are NULL
    (`nulls`) is part of the statement's shape, so the SQL never compares with a NULL parameter."""
    after = direction == "after"
    clauses, equal = [], []
    for i, ((key, desc), null) in enumerate(zip(keys, nulls, strict=True)):
        if null:  # nothing comes after NULL (NULLs last); every value comes before it
            step, same = (None if after else key.is_not(None)), key.is_(None)
        else:
            mark = bindparam(_name(i, len(keys) + 1), type_=key.type)
            later, earlier = (key < mark, key > mark) if desc else (key > mark, key < mark)
            step, same = (or_(later, key.is_(None)) if after else earlier), key == mark
        if step is not None:
            clauses.append(and_(true(), *equal, step))
        equal.append(same)
    last = bindparam("cursor_rid", type_=rid.type)
    clauses.append(and_(true(), *equal, rid > last if after else rid < last))
    return or_(*clauses)


def walk(keys: list[tuple[ColumnElement, bool]], rid: ColumnElement, at: Cursor | None) -> list:
    """The ORDER BY of a page: the forward order (keys NULLs last, then rid), or backwards from a `_before`
    cursor (the page's rows nearest the cursor first)."""
    if at is None or at.direction == "after":
        return [*q.ordering(keys), rid]
    return [
        *(key.asc().nulls_first() if desc else key.desc().nulls_first() for key, desc in keys),
        rid.desc(),
    ]


def window(
    result: SearchResult,
    rows: list,
    count: int,
    at: Cursor | None,
    offset: int,
    position: Callable[[Any], tuple],
) -> list:
    """The page among `rows` (at most count + 1, in forward order; the one beyond the page, if any, is the
    last -- after a cursor or on a first page -- or the first -- before a cursor), with whether pages come
    before and after it and its keyset positions (`position(row)`: sort keys, then rid) set on `result`."""
    more = len(rows) > count
    if at is not None and at.direction == "before":
        page = rows[1:] if more else rows
        result.has_previous, result.has_next = more, True
    else:
        page = rows[:count]
        result.has_previous, result.has_next = offset > 0 or at is not None, more
    if page:
        result.first_cursor, result.last_cursor = encode(position(page[0])), encode(position(page[-1]))
    return page


def pages(store: ResourceStore, ctx: Context, resource_type: str, params: list[tuple[str, str]],
          count: int = 1000) -> Iterator[list[StoredResource]]:
    """Every match of one search, a page at a time, each continuing from the last one's cursor and pinned
    to the first page's snapshot (as a client following `next` links is): nothing more than a page is held."""
    after, snapshot = None, None
    while True:
        request = SearchRequest(resource_type, list(params), count=count, snapshot=snapshot, cursor=after)
        result = store.search(ctx, request)
        if result.matches:
            yield result.matches
        if not result.has_next or result.last_cursor is None:
            return
        after, snapshot = decode("after", result.last_cursor), result.snapshot
