"""One FHIR URL grammar (services/fhir_api/http/urls.py): the router's routes are the table's, in the same
order; for every kind of URL the table picks the route the router picks; the fast lane serves only the
table's fast routes, so an operation added to the table and the router is never taken for a read."""

from __future__ import annotations

import httpx
import pytest
from fastapi import Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.routing import Match

from rounds.migrate import upgrade
from rounds.settings import Settings
from services.fhir_api.http import routes, urls
from tests.wiring import app_on

SAMPLES = ["", "/", "/metadata", "/_history", "/Patient", "/Patient/", "/Patient/_search",
           "/Patient/_history", "/Patient/p1", "/Patient/p1/$everything", "/Patient/p1/_history",
           "/Patient/p1/_history/2",
           "/Patient/$export", "/Patient/p1/$export", "/$export", "/Patient/p1/_history/2/x", "/metadata/x"]
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]


def router_table() -> list[tuple[str, str]]:
    """(method, path) of routes.router in order, without the trailing-slash aliases of the base."""
    out = []
    for route in routes.router.routes:
        assert isinstance(route, APIRoute)
        if route.path == "/":
            continue  # the alias of "" (include_in_schema=False)
        out += [(method, route.path) for method in sorted(route.methods) if method != "HEAD"]
    return out


def test_the_router_is_the_table() -> None:
    assert router_table() == [(route.method, route.template) for route in urls.ROUTES]


def starlette_choice(method: str, path: str) -> str | None:
    """The template of the router's route Starlette dispatches `method path` (relative to the base) to."""
    scope = {"type": "http", "method": method, "path": path, "root_path": ""}
    for route in routes.router.routes:
        matched, _ = route.matches(scope)
        if matched == Match.FULL:
            return "" if route.path == "/" else route.path  # "/" is the alias of the base ""
    return None


def test_the_table_picks_the_route_the_router_picks() -> None:
    for method in METHODS:
        for sample in SAMPLES:
            found = urls.match(method, sample)
            chosen = starlette_choice(method, sample)
            if chosen is None and sample.endswith("/") and sample != "/":
                chosen = starlette_choice(method, sample[:-1])  # Starlette redirects to it
            assert (found.route.template if found else None) == chosen, (method, sample)
    for prefix, session in (("/fhir", None), ("/sessions/s-1/fhir", "s-1")):
        base = urls.on_base(prefix + "/Patient/p1")
        assert base == urls.Location(session, "/Patient/p1") and base.relative == "Patient/p1"


@pytest.fixture
def sqlite_app(sqlite_url: str):
    upgrade(sqlite_url)
    return lambda: app_on(Settings(database_url=sqlite_url))


def test_an_operation_added_to_the_table_is_not_swallowed_by_the_fast_lane(sqlite_app, monkeypatch) -> None:
    export = urls.Route("validate", "GET", "/{type}/$validate")
    table = list(urls.ROUTES)
    table.insert(table.index(next(r for r in table if r.name == "read")), export)
    monkeypatch.setattr(urls, "ROUTES", tuple(table))
    monkeypatch.setattr(urls, "_BY_METHOD", {m: tuple(r for r in table if r.method == m)
                                             for m in {r.method for r in table}})

    async def export_endpoint(type: str, request: Request) -> JSONResponse:
        return JSONResponse({"exported": type})

    new = APIRoute("/{type}/$validate", export_endpoint, methods=["GET"])
    table = routes.router.routes
    at = next(i for i, r in enumerate(table) if r.path == "/{type}/{id}" and "GET" in r.methods)
    routes.router.routes.insert(at, new)
    try:
        app = sqlite_app()  # built with the new operation in the router, as a real change would be
        transport = httpx.ASGITransport(app=app)

        async def get(path: str) -> httpx.Response:
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                return await client.get(path)

        import asyncio

        answer = asyncio.run(get("/fhir/Patient/$validate"))
        read = asyncio.run(get("/fhir/Patient/nobody"))
    finally:
        routes.router.routes.remove(new)
    assert answer.status_code == 200 and answer.json() == {"exported": "Patient"}
    assert read.status_code == 404 and read.json()["resourceType"] == "OperationOutcome"  # reads still fast


def test_targets_and_bases() -> None:
    assert urls.on_base("/sessions/s-1") is None and urls.session_of("/sessions/s-1") == "s-1"
    assert urls.on_base("/fhirx/Patient") is None and urls.on_base("/other") is None
    assert urls.target("GET", "/fhir/Patient/p1/_history/3") == ("Patient", "p1")
    location = "http://h/sessions/s-1/fhir/Patient/n9/_history/1"
    assert urls.target("POST", "/sessions/s-1/fhir/Patient", location) == ("Patient", "n9")
    assert urls.target("GET", "/fhir/_history") == (None, None)
    assert urls.target("GET", "/fhir/Patient/p1/$everything") == ("Patient", "p1")
