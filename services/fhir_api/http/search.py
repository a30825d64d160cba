"""Search, history and $everything: result parameters, paging links and Bundle assembly.

The HTTP layer owns the paging/format parameters below; every other parameter goes to the store, which says
which ones it applied (`used_params`) so the self link lists exactly those.
"""

from __future__ import annotations

from services.fhir_api.http.bundles import bundle, history_entry, search_entry
from services.fhir_api.http.errors import FhirHttpError
from services.fhir_api.http.hostile import check_params
from services.fhir_api.http.lenient import lenient
from services.fhir_api.http.links import encode_query
from services.fhir_api.http.outcome import Call, Outcome
from services.fhir_api.http.params import parse_count, parse_instant, parse_int
from services.fhir_api.http.validation import check_type
from services.fhir_api.store import cursor
from services.fhir_api.store.interface import Cursor, SearchRequest, SearchResult

HTTP_PARAMS = frozenset(
    {
        "_count",
        "_offset",
        "_snapshot",
        "_after",
        "_before",
        "_total",
        "_totalMethod",
        "_summary",
        "_elements",
        "_format",
        "_pretty",
    }
)
TOTAL_MODES = ("none", "estimate", "accurate")
CURSOR_PARAMS = ("_after", "_before")
_ECHOED = ("_total", "_summary", "_elements")  # result parameters repeated in every paging link


def split_params(params: list[tuple[str, str]]) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """(parameters the HTTP layer handles -- last value wins, parameters for the store)."""
    own: dict[str, str] = {}
    rest: list[tuple[str, str]] = []
    for name, value in params:
        if name in HTTP_PARAMS:
            own[name] = value
        else:
            rest.append((name, value))
    return own, rest


def _total_mode(own: dict[str, str], count: int) -> str:
    total = own.get("_total", "none")
    if total not in TOTAL_MODES:
        raise FhirHttpError(400, f"_total must be one of {', '.join(TOTAL_MODES)}, got {total[:40]!r}")
    if total == "none" and (count == 0 or own.get("_totalMethod") == "count"):
        return "accurate"
    return total


def _paging_links(
    call: Call,
    path: str,
    applied: list[tuple[str, str]],
    own: dict[str, str],
    count: int,
    snapshot: int | None,
    at: str,
    previous: str | None,
    following: str | None,
) -> list[tuple[str, str]]:
    """self, first, previous, next; `at`, `previous` and `following` are page positions (`_offset=40`,
    `_after=<cursor>`, "" for the first page) and None for a page that does not exist."""
    fixed = encode_query([*applied, *((k, own[k]) for k in _ECHOED if k in own)])  # once for every link
    at_base = f"{call.base}/{path}?{fixed}&" if fixed else f"{call.base}/{path}?"
    pinned = f"&_snapshot={snapshot}" if snapshot is not None else ""

    def page(position: str) -> str:
        return f"{at_base}_count={count}{pinned}" + (f"&{position}" if position else "")

    links = [("self", f"{at_base}_count={count}" + (f"&{at}" if at else "")), ("first", page(""))]
    if previous is not None and count:
        links.append(("previous", page(previous)))
    if following is not None and count:
        links.append(("next", page(following)))
    return links


def _offset_at(offset: int) -> str:
    return f"_offset={offset}" if offset else ""


def _by_offset(offset: int, count: int, has_next: bool) -> tuple[str | None, str | None]:
    """The previous and next page positions by offset (None: no such page)."""
    previous = _offset_at(max(offset - count, 0)) if offset > 0 else None
    return previous, _offset_at(offset + count) if has_next else None


def _snapshot(own: dict[str, str]) -> int | None:
    return parse_int(own["_snapshot"], "_snapshot") if "_snapshot" in own else None


def _searchset(
    call: Call, path: str, result: SearchResult, own: dict[str, str], count: int, offset: int
) -> bytes:
    """Pages continue from the keyset cursors of the page's first and last matches; a page without matches
    (nothing to take a cursor from) links by offset. Under a filtering guard (a patient-confined token, whose
    searches are narrowed to the compartment) included resources it may not see are left out
    (services/fhir_api/auth/guard.py)."""
    includes, matches, total = result.includes, result.matches, result.total
    if call.guard is not None and call.guard.filters:
        includes = [r for r in includes if call.guard.visible(call, r)]
        matches = [r for r in matches if call.guard.visible_match(call, r)]
        total = total if len(matches) == len(result.matches) else None  # it counted what is left out
    entries = [search_entry(call.base, r, "match", call.subset) for r in matches]
    entries += [search_entry(call.base, r, "include", call.subset) for r in includes]
    at = next((f"{k}={own[k]}" for k in CURSOR_PARAMS if k in own), "")
    at = "&".join(p for p in (at, _offset_at(offset)) if p)
    if result.first_cursor is not None:
        previous = f"_before={result.first_cursor}" if result.has_previous else None
        following = f"_after={result.last_cursor}" if result.has_next else None
    else:
        previous, following = _by_offset(offset, count, result.has_next)
    links = _paging_links(
        call, path, result.used_params, own, count, result.snapshot, at, previous, following
    )
    return bundle("searchset", entries, total=total, links=links)


def search(call: Call, resource_type: str | None, params: list[tuple[str, str]]) -> Outcome:
    request = search_request(call, resource_type, params)
    return search_outcome(call, request, params, call.store.search(call.ctx, request))


def search_request(call: Call, resource_type: str | None, params: list[tuple[str, str]]) -> SearchRequest:
    own, rest = split_params(params)
    count = 0 if own.get("_summary") == "count" else parse_count(own.get("_count"))
    return SearchRequest(
        resource_type,
        bounded(lenient(rest, call.prefer.strict)),
        count=count,
        offset=parse_int(own.get("_offset", "0"), "_offset"),
        total=_total_mode(own, count),
        strict=call.prefer.strict,
        snapshot=_snapshot(own),
        cursor=_cursor(own),
    )


def bounded(params: list[tuple[str, str]]) -> list[tuple[str, str]]:
    check_params(params)  # floods are a 400, not a statement too large for the database
    return params


def _cursor(own: dict[str, str]) -> Cursor | None:
    given = [name for name in CURSOR_PARAMS if name in own]
    if len(given) > 1:
        raise FhirHttpError(400, "_after and _before cannot be combined")
    return cursor.decode(given[0][1:], own[given[0]]) if given else None


def search_outcome(
    call: Call, request: SearchRequest, params: list[tuple[str, str]], result: SearchResult
) -> Outcome:
    """The searchset Bundle of `result` (links from the request's own parameters)."""
    own, _ = split_params(params)
    if request.count == 0:
        result.matches, result.includes, result.has_next = [], [], False
    body = _searchset(call, request.resource_type or "", result, own, request.count, request.offset)
    return Outcome(200, body=body)


def everything(call: Call, patient_id: str, params: list[tuple[str, str]]) -> Outcome:
    own, rest = split_params(params)
    values = dict(rest)
    count = 0 if own.get("_summary") == "count" else parse_count(own.get("_count"), default=100)
    offset = parse_int(own.get("_offset", "0"), "_offset")
    since = parse_instant(values["_since"], "_since") if "_since" in values else None
    types = None
    if "_type" in values:
        types = [check_type(t.strip()) for t in values["_type"].split(",") if t.strip()]
    result = call.store.everything(
        call.ctx,
        patient_id,
        since=since,
        types=types,
        count=count,
        offset=offset,
        cursor=_cursor(own),
        total=_total_mode(own, count),
        snapshot=_snapshot(own),
    )
    result.used_params = [(k, values[k]) for k in ("_since", "_type") if k in values]
    return Outcome(
        200, body=_searchset(call, f"Patient/{patient_id}/$everything", result, own, count, offset)
    )


def history(call: Call, resource_type: str | None, id: str | None, params: list[tuple[str, str]]) -> Outcome:
    own, rest = split_params(params)
    values = dict(rest)
    count = parse_count(own.get("_count"))
    offset = parse_int(own.get("_offset", "0"), "_offset")
    since = parse_instant(values["_since"], "_since") if "_since" in values else None
    versions, total, snapshot = call.store.history(
        call.ctx, resource_type, id, since=since, count=count, offset=offset, snapshot=_snapshot(own)
    )
    path = "/".join(p for p in (resource_type, id, "_history") if p)
    applied = [("_since", values["_since"])] if since else []
    previous, following = _by_offset(offset, count, offset + len(versions) < total)
    links = _paging_links(call, path, applied, own, count, snapshot, _offset_at(offset), previous, following)
    if call.guard is not None and call.guard.filters:  # other patients' versions left out, and their count
        versions, total = [v for v in versions if call.guard.visible(call, v)], None
    entries = [history_entry(call.base, v) for v in versions]
    return Outcome(200, body=bundle("history", entries, total=total, links=links))
