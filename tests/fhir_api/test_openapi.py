"""The OpenAPI document is complete: valid OpenAPI, every route of the app described, every path
parameter declared, FHIR bodies with their media types, every error an OperationOutcome. Whether the server
keeps to it is test_schemathesis.py's job."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi.routing import APIRoute
from openapi_spec_validator import validate
from starlette.testclient import TestClient

from rounds.migrate import upgrade
from rounds.settings import Settings
from services.fhir_api.app import create_app
from services.fhir_api.http import urls
from services.fhir_api.http.validation import served_types
from tests.wiring import app_on

METHODS = ("get", "put", "post", "delete", "patch")


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Any:
    url = f"sqlite:///{tmp_path_factory.mktemp('openapi') / 'rounds.sqlite'}"
    upgrade(url)
    return app_on(Settings(database_url=url))


@pytest.fixture(scope="module")
def doc(app: Any) -> dict[str, Any]:
    response = TestClient(app).get("/openapi.json")
    assert response.status_code == 200
    return response.json()


def resolve(doc: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        *_, kind, name = node["$ref"].split("/")
        node = doc["components"][kind][name]
    return node


def operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(method, path, op) for path, item in doc["paths"].items()
            for method, op in item.items() if method in METHODS]


def parameters(doc: dict[str, Any], op: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    found = [resolve(doc, p) for p in op.get("parameters", [])]
    return {(p["in"], p["name"]): p for p in found}


def test_the_document_is_valid_openapi(doc):
    validate(doc)


def test_every_route_of_the_app_is_described(app, doc):
    routed = {(method.lower(), route.path) for route in app.routes if isinstance(route, APIRoute)
              and route.include_in_schema for method in route.methods if method != "HEAD"}
    described = {(method, path) for method, path, _ in operations(doc)}
    assert routed <= described
    for base in ("/fhir", "/sessions/{session_id}/fhir"):
        for route in urls.ROUTES:
            assert (route.method.lower(), base + route.template) in described, (base, route.name)
    ids = [op["operationId"] for _, _, op in operations(doc)]
    assert len(ids) == len(set(ids))


def test_every_path_parameter_is_declared(doc):
    for method, path, op in operations(doc):
        declared = {name for (where, name), p in parameters(doc, op).items() if where == "path"}
        assert declared == set(re.findall(r"\{(\w+)\}", path)), (method, path)
        for (where, name), p in parameters(doc, op).items():
            assert p.get("required") or where != "path", (method, path, name)
    session = parameters(doc, doc["paths"]["/sessions/{session_id}/fhir/{type}/{id}"]["get"])
    assert ("path", "session_id") in session


def test_fhir_query_parameters_and_types_are_declared(doc):
    search = parameters(doc, doc["paths"]["/fhir/{type}"]["get"])
    for name in ("_count", "_sort", "_include", "_revinclude", "_summary", "_elements", "_format", "_total",
                 "_after", "_before", "_snapshot"):
        assert ("query", name) in search, name
    criteria = search[("query", "criteria")]
    assert (criteria["style"], criteria["explode"], criteria["schema"]["type"]) == ("form", True, "object")
    assert ("query", "_since") in parameters(doc, doc["paths"]["/fhir/_history"]["get"])
    type_schema = resolve(doc, search[("path", "type")]["schema"])
    assert set(type_schema["enum"]) == served_types() and "Patient" in type_schema["enum"]
    read = parameters(doc, doc["paths"]["/fhir/{type}/{id}"]["get"])
    assert ("header", "If-None-Match") in read
    assert ("header", "If-Match") in parameters(doc, doc["paths"]["/fhir/{type}/{id}"]["put"])


def test_bodies_are_declared_with_fhir_media_types(doc):
    for method, path, op in operations(doc):
        if method not in ("post", "put", "patch"):
            assert "requestBody" not in op, (method, path)
            continue
        body = op.get("requestBody")
        assert body is not None, (method, path)
        if path.startswith(("/fhir", "/sessions/{session_id}/fhir")) and not path.endswith("/_search"):
            assert body["required"] is True, (method, path)
            assert {"application/fhir+json", "application/json"} <= set(body["content"]), (method, path)
            schema = resolve(doc, body["content"]["application/fhir+json"]["schema"])
            assert "resourceType" in schema.get("required", []) or method == "patch", (method, path)
        if method == "patch":
            assert {"application/json-patch+json", "application/merge-patch+json"} <= set(body["content"])
    bundle = doc["paths"]["/fhir"]["post"]["requestBody"]["content"]["application/fhir+json"]["schema"]
    assert resolve(doc, bundle)["properties"]["resourceType"]["enum"] == ["Bundle"]


def test_every_error_is_an_operation_outcome(doc):
    outcome = doc["components"]["schemas"]["OperationOutcome"]
    for method, path, op in operations(doc):
        statuses = set(op["responses"])
        assert "422" not in statuses or method in ("post", "put", "patch"), (method, path)
        if path.startswith(("/fhir", "/sessions/{session_id}/fhir")) and ".well-known" not in path:
            # a success (202: an asynchronous operation, $export) and the common errors
            assert {"400", "404", "406"} <= statuses and statuses & {"200", "202"}, (method, path)
        if path.startswith("/auth") or path in ("/health",):
            continue  # OAuth errors (RFC 6749) and the health report have their own documents
        for status, response in op["responses"].items():
            if int(status) < 400:
                continue
            content = resolve(doc, response).get("content", {})
            assert set(content) == {"application/fhir+json"}, (method, path, status)
            assert resolve(doc, content["application/fhir+json"]["schema"]) == outcome


def test_statuses_follow_the_interaction(doc):
    paths = doc["paths"]
    read, create = paths["/fhir/{type}/{id}"]["get"], paths["/fhir/{type}"]["post"]
    assert {"304", "410"} <= set(read["responses"])
    assert {"201", "409", "412", "413", "415", "422"} <= set(create["responses"])
    assert "Location" in resolve(doc, create["responses"]["201"])["headers"]
    assert {"204", "412"} <= set(paths["/fhir/{type}"]["delete"]["responses"])
    assert "412" in paths["/fhir/{type}/{id}"]["put"]["responses"]
    assert "201" in paths["/sessions"]["post"]["responses"]
    # access control: bearer tokens are described; the CapabilityStatement stays public
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert {"401", "403"} <= set(read["responses"])
    assert not {"401", "403"} & set(paths["/fhir/metadata"]["get"]["responses"])


def test_a_route_the_data_does_not_describe_keeps_its_own_description(app):
    """The simulator mounts its patient endpoint on the embedded app: its own statuses stay, FastAPI's 422
    (never answered: validation errors are 400s) goes, access control's and the request limits' come."""
    from services.simulator.orchestrator.patient_http import router

    app = create_app(app.state.settings, app.state.store)
    app.include_router(router)
    doc = app.openapi()
    validate(doc)
    op = doc["paths"]["/sessions/{session_id}/patient"]["post"]
    assert {"200", "400", "401", "403", "404", "409", "414", "429", "431", "503"} == set(op["responses"])
    assert op["requestBody"]["required"] is True


def test_the_mcp_endpoint_is_described_once_mounted(app):
    """The MCP endpoint is an ASGI middleware ahead of the router: mount_mcp describes it (openapi.add_paths)
    with its body and statuses, and the document stays valid."""
    from services.simulator.assistants.mcp_server import mount_mcp

    app = create_app(app.state.settings, app.state.store)
    assert "/sessions/{session_id}/mcp" not in app.openapi()["paths"]
    mount_mcp(app)
    doc = app.openapi()
    validate(doc)
    op = doc["paths"]["/sessions/{session_id}/mcp"]["post"]
    assert ("path", "session_id") in parameters(doc, op)
    assert {"200", "202", "400", "401", "403", "404"} <= set(op["responses"])
    assert resolve(doc, op["requestBody"]["content"]["application/json"]["schema"])["required"] == ["jsonrpc"]
