"""Schemathesis against the app's own, complete OpenAPI on both backends.

The app is wired as `rounds serve` wires it (session exchanges recorded on the event log before they are
answered). Every generated request must get a response the document describes: no 5xx, a documented status,
a documented media type and a body that fits the documented schema. Requests are generated three ways per
operation: freely (`positive`: mostly unknown sessions and ids, so 404s), against what exists (the session, a
Patient and its version opened beforehand, with a valid resource as the body where one is taken: reads,
writes, conflicts, version checks) and deliberately invalid (`negative`). Bounded:
`ROUNDS_SCHEMATHESIS_EXAMPLES` cases per operation and way (default 3); benchmarks/bench_schemathesis.py runs
more and prints the figures.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from rounds.migrate import upgrade
from rounds.settings import Settings
from services.fhir_api.app import create_app
from services.fhir_api.auth.scopes import parse_scopes
from services.fhir_api.backbone.wiring import BackboneSettings, install_event_backbone
from services.fhir_api.store.interface import Context
from tests.wiring import bus_on, store_on

pytestmark = pytest.mark.slow  # whole pipelines, subprocesses or real services: not in the fast lane

EXAMPLES = int(os.environ.get("ROUNDS_SCHEMATHESIS_EXAMPLES", "3"))
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
PATIENT = {"resourceType": "Patient", "id": "schema-p1", "gender": "female", "birthDate": "1970-01-01"}
INVALID = {**PATIENT, "gender": "sometimes", "birthDate": "yesterday"}  # well-formed, not valid R4: 422


@dataclass
class Figures:
    """What a run saw: cases, statuses, and each failure (server error or response outside the document)."""

    cases: int = 0
    statuses: Counter = field(default_factory=Counter)
    server_errors: list[str] = field(default_factory=list)
    nonconforming: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (f"{self.cases} cases, {len(self.server_errors)} server errors, {len(self.nonconforming)} "
                f"responses outside the document; statuses {dict(sorted(self.statuses.items()))}")


def _existing(store: Any) -> dict[str, Any]:
    """Open a session and store a Patient (twice, so it has versions 1 and 2) in the shared record and in
    the session. Through the store's own calls: no event loop other than schemathesis' one ever holds the
    store's async connections (a pooled one used from a second loop can hang)."""
    session = store.create_session(None)
    for ctx in (Context(), store.get_session(session)):
        for _ in range(2):
            store.update(ctx, "Patient", PATIENT["id"], dict(PATIENT))
    return {"session_id": session, "type": "Patient", "id": PATIENT["id"], "version": "1"}


def _strategies(operation: Any, known: dict[str, Any], tokens: list[str]) -> list[Any]:
    """Free and negative strategies; aimed at what exists (with a valid and with an invalid resource as
    the body where the operation takes a resource) and, where the operation is conditional on a version,
    aimed at the current version. With access control on (`tokens`), the aimed ones once with each token
    and the free ones with none."""
    names = {p.name for p in operation.path_parameters}
    aimed: dict[str, Any] = {"path_parameters": {k: v for k, v in known.items() if k in names}}
    strategies = [operation.as_strategy(), operation.as_strategy(generation_mode=GenerationMode.NEGATIVE)]
    variants = [aimed]
    body = operation.definition.raw.get("requestBody", {}).get("content", {})
    if "application/fhir+json" in body and "type" in names:
        variants = [{**aimed, "body": PATIENT, "media_type": "application/fhir+json"},
                    {**aimed, "body": INVALID, "media_type": "application/fhir+json"}]
    conditions = {p.name for p in operation.headers} & {"If-Match", "If-None-Match"}
    if conditions:  # the current version (2) named: 304 on a read, a version-aware write that succeeds
        variants.append({**variants[0], "headers": dict.fromkeys(conditions, 'W/"2"')})
    for token in tokens or [None]:
        bearer = {"Authorization": f"Bearer {token}"} if token else {}
        strategies += [operation.as_strategy(**{**v, "headers": {**v.get("headers", {}), **bearer}})
                       for v in variants]
    return strategies


def _tokens(app: Any, known: dict[str, Any]) -> list[str]:
    """With access control on: a managing token, the session's token and a patient-confined one."""
    auth = app.state.auth
    if auth is None:
        return []
    session, patient = known["session_id"], known["id"]
    return [auth.token(parse_scopes("system/*.cruds"), "schemathesis"), auth.session_token(session, None),
            auth.session_token(session, patient)]


def run_schemathesis(database_url: str, examples: int = EXAMPLES,
                     progress: Callable[[str], None] | None = None, *, auth: bool = False,
                     mount: Callable[[Any], Any] | None = None, only: str | None = None) -> Figures:
    """Run every operation of the document (or those whose path ends with `only`) against a fresh app on
    `database_url`, with access control on when `auth`, and with what `mount(app)` adds to it."""
    upgrade(database_url)
    store = store_on(database_url)
    key = "k" * 32 if auth else None
    config = Settings(database_url=database_url, auth=auth, auth_key=key)
    app = create_app(config, store)
    # as `rounds serve` runs it: session exchanges recorded on the event log before they are answered
    backbone = install_event_backbone(app, config, bus=bus_on(config),
                                      backbone=BackboneSettings(outbox_relay="off"))
    if mount is not None:
        mount(app)
    figures = Figures()
    try:
        known = _existing(store)
        tokens = _tokens(app, known)
        schema = schemathesis.openapi.from_asgi("/openapi.json", app)
        for result in schema.get_all_operations():
            operation = result.ok()
            if only and not operation.path.endswith(only):
                continue
            for strategy in _strategies(operation, known, tokens):

                @settings(max_examples=examples, deadline=None, database=None,
                          suppress_health_check=list(HealthCheck))
                @given(case=strategy)
                def check(case: Any) -> None:
                    figures.cases += 1
                    try:
                        response = case.call()
                    except Exception as exc:  # noqa: BLE001 - an exception out of the app is a server error
                        figures.server_errors.append(f"{case.method} {case.formatted_path}: {exc!r}"[:500])
                        return
                    figures.statuses[int(response.status_code)] += 1
                    try:
                        case.validate_response(response, checks=CHECKS)
                    except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - each failure is collected
                        where = (figures.server_errors if response.status_code >= 500
                                 else figures.nonconforming)
                        where.append(f"{case.method} {case.formatted_path} -> {response.status_code}: "
                                     f"{str(exc)[:400]}")

                with contextlib.suppress(Unsatisfiable):  # negative: nothing to make invalid
                    check()
            if progress:
                progress(f"{operation.label}: {figures.summary()}")
    finally:
        backbone.close()
        store.engine.dispose()
    return figures


def test_run_counts_a_response_outside_the_document(sqlite_url, monkeypatch):
    """The run is not vacuous: a server answering a status its document does not list is caught."""
    from services.fhir_api.http import openapi

    real = openapi.rules()
    narrowed = {**real, "fhir": {**real["fhir"], "errors": ["400", "401", "403", "406", "503"]}}
    monkeypatch.setattr(openapi, "rules", lambda: narrowed)  # 404 (unknown session, id...) undocumented
    # the operations on one resource (read, update, delete of unknown ids answer 404): enough to be caught
    figures = run_schemathesis(sqlite_url, examples=2, only="/{id}")
    assert figures.cases and figures.nonconforming, figures.summary()
    assert any("-> 404" in failure for failure in figures.nonconforming)


@pytest.mark.slow
def test_every_generated_request_gets_a_documented_response(database_url):
    figures = run_schemathesis(database_url)
    assert figures.cases >= 3 * 40 * EXAMPLES, figures.summary()
    assert figures.server_errors == [], figures.server_errors[:5]
    assert figures.nonconforming == [], figures.nonconforming[:5]
    for status in (200, 201, 204, 304, 400, 404, 406, 412, 422):
        assert figures.statuses[status], (status, figures.summary())


def test_with_access_control_on_every_response_is_documented(sqlite_url):
    """ROUNDS_AUTH=on: no token (401), a token outside its session or patient (403) and a managing token
    all get documented answers."""
    figures = run_schemathesis(sqlite_url, examples=2, auth=True)
    assert figures.server_errors == [], figures.server_errors[:5]
    assert figures.nonconforming == [], figures.nonconforming[:5]
    for status in (200, 201, 401, 403, 404):
        assert figures.statuses[status], (status, figures.summary())


def test_the_mcp_endpoint_keeps_to_its_description(sqlite_url):
    """The simulator's MCP endpoint (mounted on the app, described through openapi.add_paths): JSON-RPC
    answers, notifications, malformed messages and unknown sessions are all documented."""
    from services.simulator.assistants.mcp_server import mount_mcp

    figures = run_schemathesis(sqlite_url, examples=25, mount=mount_mcp, only="/mcp")
    assert figures.server_errors == [], figures.server_errors[:5]
    assert figures.nonconforming == [], figures.nonconforming[:5]
    for status in (200, 400, 404):
        assert figures.statuses[status], (status, figures.summary())
