"""docs/events/ holds the JSON Schemas the models generate, and they accept what the catalog produces."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from events.catalog import CATALOG
from events.schemas import DOCS, render
from tests.events.test_catalog import SAMPLES, sample_event


def test_exported_schemas_are_up_to_date() -> None:
    expected = render()
    on_disk = {str(p.relative_to(DOCS)): p.read_bytes() for p in DOCS.rglob("*.json")}
    stale = sorted(k for k in expected if on_disk.get(k) != expected[k])
    extra = sorted(set(on_disk) - set(expected))
    assert not stale and not extra, f"run `python -m events.schemas` (stale {stale}, extra {extra})"


@pytest.mark.parametrize("type_", sorted(SAMPLES))
def test_schema_files_validate_catalogued_events(type_: str) -> None:
    event = sample_event(type_)
    spec = CATALOG.spec(type_)
    schema = json.loads((DOCS / type_ / f"v{spec.version}.json").read_text())
    assert schema["$id"] == event.dataschema
    jsonschema.validate(event.data, schema)
    envelope = json.loads((DOCS / "cloudevent.json").read_text())
    jsonschema.validate(event.to_dict(), envelope)
    broken = {k: v for k, v in event.data.items() if k not in schema.get("required", [])[:1]}
    if schema.get("required"):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, schema)


def test_readme_documents_the_upgrade_rule() -> None:
    text = (Path(DOCS) / "README.md").read_text()
    assert "Upgrade rule" in text and "upcaster" in text
