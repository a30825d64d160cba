"""Export the JSON Schema of the scenario line to docs/scenarios/scenario.v<N>.json
(`python -m contracts.scenario_schema`), beside the event schemas in docs/events/.

tests/simulator/scenarios/test_schema.py fails when the committed file drifts from the model."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson

from contracts.scenario import SCENARIO_FORMAT_VERSION, Scenario

DOCS = Path(__file__).resolve().parents[1] / "docs" / "scenarios"
DRAFT = "https://json-schema.org/draft/2020-12/schema"


def file_name() -> str:
    return f"scenario.v{SCENARIO_FORMAT_VERSION}.json"


def render() -> bytes:
    """The schema document (deterministic: sorted keys, 2-space indent)."""
    schema = {
        "$schema": DRAFT,
        "$id": f"https://rounds.dev/schemas/scenarios/{file_name()}",
        **Scenario.model_json_schema(),
        "title": f"Rounds scenario line v{SCENARIO_FORMAT_VERSION}",
        "description": "One benchmark session per JSONL line (docs/scenarios.md).",
    }
    return orjson.dumps(schema, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def export(target: Path = DOCS) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    path = target / file_name()
    path.write_bytes(render())
    return path


if __name__ == "__main__":
    print(export(Path(sys.argv[1]) if len(sys.argv) > 1 else DOCS))
