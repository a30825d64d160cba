"""The OpenAPI document (`/openapi.json`, `/docs`), built from data: openapi.json beside this module.

FastAPI's own description of the FHIR router knows only `{type}` and `{id}` strings and a 422 nobody answers.
The rules that make the real description repeat over 18 interactions and two bases, so they are data: each
interaction of `urls.ROUTES` is described once in openapi.json (parameters, body, success and error statuses)
and repeated on `/fhir` and `/sessions/{session_id}/fhir`; the sessions, health and token routes are
described by `METHOD path`; every error is an OperationOutcome in `application/fhir+json`. A route the data
does not describe keeps FastAPI's description, with the validation error it would really answer (400, an
OperationOutcome; http/errors.py) instead of 422. tests/fhir_api/test_openapi.py holds the document to the
app's routes, and test_schemathesis.py holds the server to the document.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from services.fhir_api.http import urls
from services.fhir_api.http.validation import served_types

DATA = Path(__file__).with_name("openapi.json")
FHIR_BASES = ("/fhir", "/sessions/{session_id}/fhir")
ERROR = "#/components/responses/Error{status}"
AUTH_STATUSES = ("401", "403")


@cache
def rules() -> dict[str, Any]:
    return json.loads(DATA.read_text())


def _ref(kind: str, name: str) -> dict[str, str]:
    return {"$ref": f"#/components/{kind}/{name}"}


def _content(media: list[str], schema: str) -> dict[str, Any]:
    return {media_type: {"schema": _ref("schemas", schema)} for media_type in media}


def _response(spec: dict[str, Any]) -> dict[str, Any]:
    """A components.responses entry from its short form (description, media group, schema, headers)."""
    out: dict[str, Any] = {"description": spec["description"]}
    if "schema" in spec:
        out["content"] = _content(rules()["media"][spec["media"]], spec["schema"])
    if spec.get("headers"):
        out["headers"] = {name: _ref("headers", name) for name in spec["headers"]}
    return out


def _error_response(status: str, description: str) -> dict[str, Any]:
    out: dict[str, Any] = {"description": description,
                           "content": _content(rules()["media"]["error"], "OperationOutcome")}
    if status in AUTH_STATUSES:
        out["headers"] = {"WWW-Authenticate": _ref("headers", "WWW-Authenticate")}
    return out


def components() -> dict[str, Any]:
    """Schemas, parameters, headers, security schemes and the named responses (one Error<status> each)."""
    data = rules()
    out = copy.deepcopy(data["components"])
    out["schemas"]["ResourceType"]["enum"] = sorted(served_types())
    out["responses"] = {name: _response(spec) for name, spec in data["responses"].items()}
    out["responses"].update({f"Error{status}": _error_response(status, description)
                             for status, description in data["errors"].items()})
    return out


def _parameters(names: list[str]) -> list[dict[str, str]]:
    """Parameter refs in order, `@group` names expanded, each name once."""
    groups = rules()["groups"]
    expanded = [member for name in names for member in (groups[name] if name.startswith("@") else [name])]
    return [_ref("parameters", name) for name in dict.fromkeys(expanded)]


def _body(name: str) -> dict[str, Any]:
    spec = rules()["bodies"][name]
    if "content" in spec:
        content = {media: {"schema": _ref("schemas", schema)} for media, schema in spec["content"].items()}
    else:
        content = _content(rules()["media"][spec["media"]], spec["schema"])
    return {"required": spec["required"], "content": content}


def operation(spec: dict[str, Any], *, parameters: list[str] = (), errors: list[str] = (),
              public: bool = False) -> dict[str, Any]:
    """One operation object from its data: `parameters`/`errors` come first (the base's and the FHIR
    interactions' common ones), then the operation's own."""
    public = public or spec.get("public", False)
    statuses = {status: _ref("responses", name) for status, name in spec["responses"].items()}
    for status in [*errors, *spec.get("errors", []), *rules()["everywhere"]]:
        if not (public and status in AUTH_STATUSES):
            statuses.setdefault(status, {"$ref": ERROR.format(status=status)})
    out: dict[str, Any] = {"parameters": _parameters([*parameters, *spec.get("parameters", [])]),
                           "responses": dict(sorted(statuses.items()))}
    if "body" in spec:
        out["requestBody"] = _body(spec["body"])
    out["security"] = [] if public else [{}, {"bearer": []}]  # bearer needed only with ROUNDS_AUTH=on
    for key in ("summary", "tags", "operationId"):
        if key in spec:
            out[key] = spec[key]
    return out


def _camel(name: str) -> str:
    head, *rest = name.split("-")
    return head + "".join(part.capitalize() for part in rest)


def fhir_operation(route: urls.Route, base: str, tags: list[str]) -> dict[str, Any]:
    """The description of one interaction on one base (the session base adds `session_id`)."""
    fhir = rules()["fhir"]
    spec = fhir["routes"][route.name]
    session = base != "/fhir"
    out = operation(spec, parameters=[*(["session_id"] if session else []), *fhir["parameters"]],
                    errors=fhir["errors"], public=route.name in fhir["public"])
    out["operationId"] = _camel(("session-" if session else "") + route.name)
    out["tags"] = tags
    return out


def _fhir_route(path: str, method: str) -> tuple[str, urls.Route] | None:
    for base in FHIR_BASES:
        if path == base or path.startswith(base + "/"):
            rest = path[len(base):]
            found = next((r for r in urls.ROUTES if r.method == method.upper() and r.template == rest), None)
            return (base, found) if found else None
    return None


def _fallback(op: dict[str, Any]) -> dict[str, Any]:
    """A route the data does not describe (the simulator's patient endpoint): FastAPI's description, its
    422 replaced by the 400 the app's validation handler answers, with the refusals of access control and
    of the request limits, which come before any route."""
    responses = op.setdefault("responses", {})
    if responses.pop("422", None) is not None:
        responses.setdefault("400", {"$ref": ERROR.format(status="400")})
    for status in [*AUTH_STATUSES, *rules()["everywhere"]]:
        responses.setdefault(status, {"$ref": ERROR.format(status=status)})
    op.setdefault("security", [{}, {"bearer": []}])
    return op


def document(app: FastAPI) -> dict[str, Any]:
    """The complete OpenAPI document of `app`."""
    doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    data = rules()
    for path, item in doc["paths"].items():
        for method, op in list(item.items()):
            fhir = _fhir_route(path, method)
            key = f"{method.upper()} {path}"
            if fhir is not None:
                item[method] = fhir_operation(fhir[1], fhir[0], op.get("tags", []))
            elif key in data["operations"]:
                described = operation(data["operations"][key])
                kept = {k: op[k] for k in ("tags", "summary", "operationId") if k in op}
                item[method] = {**kept, **described}
            else:
                item[method] = _fallback(op)
    for path, methods in data["paths"].items():
        extra = {method: operation(spec) for method, spec in methods.items()}
        doc["paths"].setdefault(path, {}).update(extra)
    added_paths, added_schemas = getattr(app.state, "openapi_added", ({}, {}))
    for path, item in added_paths.items():
        doc["paths"].setdefault(path, {}).update(copy.deepcopy(item))
    schemas = doc.get("components", {}).get("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    doc["components"] = {**components(), "schemas": {**schemas, **added_schemas, **components()["schemas"]}}
    return doc


def add_paths(app: FastAPI, paths: dict[str, Any], schemas: dict[str, Any] | None = None) -> None:
    """Describe endpoints served ahead of the router (the simulator's MCP endpoint, an ASGI middleware):
    their path items (which may refer to this document's components) and the schemas they add."""
    added_paths, added_schemas = getattr(app.state, "openapi_added", ({}, {}))
    app.state.openapi_added = ({**added_paths, **paths}, {**added_schemas, **(schemas or {})})
    app.openapi_schema = None


def install_openapi(app: FastAPI) -> None:
    """Serve `document(app)` at /openapi.json (built once, on first request, after every router is in)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
