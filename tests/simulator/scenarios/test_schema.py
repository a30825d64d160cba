"""The committed JSON Schema of the scenario line matches the model, and built lines validate against it."""

from __future__ import annotations

import json

import jsonschema
import pytest

from contracts import scenario_schema as schema
from services.simulator.scenarios import output


def test_the_committed_schema_is_the_models() -> None:
    committed = schema.DOCS / schema.file_name()
    assert committed.exists(), "run python -m contracts.scenario_schema"
    assert committed.read_bytes() == schema.render(), "docs/scenarios drifted: re-export the schema"


@pytest.mark.parametrize("count", [40])
def test_built_lines_validate_against_the_schema(demo_build, count: int) -> None:
    validator = jsonschema.Draft202012Validator(json.loads(schema.render()))
    for scenario in demo_build.scenarios[:: max(1, len(demo_build.scenarios) // count)]:
        validator.validate(json.loads(output.line(scenario)))
