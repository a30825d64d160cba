"""The FHIR URL grammar of this server, in one table: which interaction a method and a path name.

Every part that reads FHIR URLs uses it: the REST router's routes (routes.py; a test holds the router to this
table, route by route and in order), the fast lane (only routes marked `fast` are served there, so a new
operation such as `GET /{type}/$export` in the table is never taken for a read), transaction and batch
entries (transaction.py dispatches on the matched route), the interaction hook and the event recorder (which
base a path is on, its session, its type and id).

Matching follows Starlette's rules, which the router uses: routes are tried in order, a literal segment
matches itself, `{name}` matches any one non-empty segment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

BASE = re.compile(r"^(?:/sessions/(?P<session>[^/]+))?/fhir(?P<rest>/.*)?$")
SESSION_PATH = re.compile(r"^/sessions/(?P<session>[^/]+)(?:/|$)")


@dataclass(frozen=True)
class Route:
    """One interaction: its name, HTTP method and path template relative to a FHIR base."""

    name: str
    method: str
    template: str  # "" is the base itself; "/{type}/{id}" etc.
    fast: bool = False  # served by the fast lane (GET read and type search)
    recorded: bool = True  # a session's exchange on it is a session event (backbone/recorder.py)
    pattern: re.Pattern = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parts = (re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(segment))
                 for segment in self.template.split("/")[1:])
        object.__setattr__(self, "pattern", re.compile("^" + "".join("/" + part for part in parts) + "$"))


ROUTES: tuple[Route, ...] = (
    Route("capabilities", "GET", "/metadata"),
    Route("batch", "POST", ""),
    Route("search-system", "GET", ""),
    Route("history-system", "GET", "/_history"),
    Route("export-system", "GET", "/$export"),  # Bulk Data (services/fhir_api/bulk)
    Route("export-system-post", "POST", "/$export"),
    Route("export-status", "GET", "/$export-poll-status"),
    Route("export-cancel", "DELETE", "/$export-poll-status"),
    Route("search-type", "GET", "/{type}", fast=True),
    Route("search-type-post", "POST", "/{type}/_search"),
    Route("history-type", "GET", "/{type}/_history"),
    Route("create", "POST", "/{type}"),
    Route("conditional-update", "PUT", "/{type}"),
    Route("conditional-patch", "PATCH", "/{type}"),
    Route("conditional-delete", "DELETE", "/{type}"),
    Route("export-type", "GET", "/{type}/$export"),
    Route("export-type-post", "POST", "/{type}/$export"),
    Route("export-instance", "GET", "/{type}/{id}/$export"),
    Route("export-instance-post", "POST", "/{type}/{id}/$export"),
    # a Bulk Data file is the record itself, streamed from disk: held whole as a session event it would be
    # buffered and copied (its kick-off and status polls are recorded)
    Route("export-file", "GET", "/$export-file/{job}/{file}", recorded=False),
    Route("subscription-status", "GET", "/{type}/{id}/$status"),  # services/fhir_api/subscriptions
    Route("subscription-status-post", "POST", "/{type}/{id}/$status"),
    Route("everything", "GET", "/{type}/{id}/$everything"),
    Route("read", "GET", "/{type}/{id}", fast=True),
    Route("update", "PUT", "/{type}/{id}"),
    Route("patch", "PATCH", "/{type}/{id}"),
    Route("delete", "DELETE", "/{type}/{id}"),
    Route("history-instance", "GET", "/{type}/{id}/_history"),
    Route("vread", "GET", "/{type}/{id}/_history/{version}"),
)
_BY_METHOD: dict[str, tuple[Route, ...]] = {
    name: tuple(route for route in ROUTES if route.method == name) for name in {r.method for r in ROUTES}
}


@dataclass(frozen=True)
class Match:
    route: Route
    params: dict[str, str]


def match(method: str, path: str) -> Match | None:
    """The route `method` + `path` (relative to a FHIR base, "" or "/..."; a trailing slash is ignored, as
    the router's aliases do) selects, with its parameters; None when no route does."""
    if path.endswith("/"):
        path = path[:-1]
    for route in _BY_METHOD.get(method.upper(), ()):
        found = route.pattern.match(path)
        if found is not None:
            return Match(route, found.groupdict())
    return None


@dataclass(frozen=True)
class Location:
    """Where a request path points: its FHIR base's session (None for /fhir) and the path after the base."""

    session_id: str | None
    rest: str  # "" or "/..."

    @property
    def relative(self) -> str:
        """The path relative to the base without its leading slash, e.g. "Patient/123/$everything"."""
        return self.rest.lstrip("/")


def on_base(path: str) -> Location | None:
    """The FHIR base `path` is on (/fhir or /sessions/<id>/fhir), or None for any other path."""
    found = BASE.match(path)
    return Location(found["session"], found["rest"] or "") if found else None


def session_of(path: str) -> str | None:
    """The session a path belongs to: its FHIR base's, or /sessions/<id>/... itself (the sessions API)."""
    found = SESSION_PATH.match(path)
    return found["session"] if found else None


def target(method: str, path: str, location: str | None = None) -> tuple[str | None, str | None]:
    """(resource type, id) a request on a FHIR base acts on; a create's id comes from its Location header."""
    base = on_base(path)
    found = match(method, base.rest) if base else None
    if found is None:
        return None, None
    type_, id_ = found.params.get("type"), found.params.get("id")
    if type_ and id_ is None and location:
        named = location.split("/fhir/", 1)[-1].split("/")
        if len(named) > 1 and named[0] == type_:
            id_ = named[1]
    return type_, id_
