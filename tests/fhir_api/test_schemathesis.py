"""Schemathesis (issue 19 item 6) against the app's own OpenAPI on both backends: no generated request may get
a 5xx, and responses must match the documented schemas. Bounded: `ROUNDS_SCHEMATHESIS_EXAMPLES` cases per
operation (default 5; 60 gives > 2,000 cases in all)."""

from __future__ import annotations

import os

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from rounds.migrate import upgrade
from rounds.settings import Settings
from services.fhir_api.app import create_app
from services.fhir_api.store import open_store

EXAMPLES = int(os.environ.get("ROUNDS_SCHEMATHESIS_EXAMPLES", "5"))


def run_schemathesis(database_url: str) -> tuple[int, list[str]]:
    """(cases run, failures) over every operation of the OpenAPI document."""
    upgrade(database_url)
    store = open_store(database_url)
    app = create_app(Settings(database_url=database_url), store)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    cases, failures = 0, []
    try:
        for result in schema.get_all_operations():
            operation = result.ok()

            @settings(max_examples=EXAMPLES, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))
            @given(case=operation.as_strategy())
            def check(case) -> None:
                nonlocal cases
                cases += 1
                try:
                    case.call_and_validate(checks=[not_a_server_error, response_schema_conformance])
                except Exception as exc:  # noqa: BLE001 - every failure is collected and reported
                    failures.append(f"{case.method} {case.path}: {str(exc)[:300]}")

            check()
    finally:
        store.engine.dispose()
    return cases, failures


@pytest.mark.slow
def test_no_server_error_on_generated_requests(database_url):
    cases, failures = run_schemathesis(database_url)
    assert cases >= 20 * EXAMPLES, cases
    assert failures == [], failures[:5]
