"""Export the JSON Schema of every event type and version to docs/events/ (`python -m events.schemas`).

docs/events/<type>/v<N>.json is the document a CloudEvent's `dataschema` names; tests/events/test_schemas.py
fails when the committed files drift from the models.
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson

from events.catalog import CATALOG, Catalog
from events.envelope import CloudEvent

DOCS = Path(__file__).resolve().parent.parent / "docs" / "events"
DRAFT = "https://json-schema.org/draft/2020-12/schema"


def render(catalog: Catalog = CATALOG) -> dict[str, bytes]:
    """Relative path -> file bytes for every schema (deterministic: sorted keys, 2-space indent)."""
    files = {}
    for spec in catalog:
        for version, model in sorted(spec.versions.items()):
            schema = {"$schema": DRAFT, "$id": spec.schema_uri(version), "title": f"{spec.type} v{version}"}
            schema |= model.model_json_schema(by_alias=True)
            schema["title"] = f"{spec.type} v{version}"
            files[f"{spec.type}/v{version}.json"] = _dump(schema)
    envelope = {"$schema": DRAFT, "$id": "https://rounds.dev/schemas/events/cloudevent.json"}
    files["cloudevent.json"] = _dump(envelope | CloudEvent.model_json_schema())
    return files


def _dump(obj: dict) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def export(target: Path = DOCS, catalog: Catalog = CATALOG) -> list[Path]:
    written = []
    for rel, content in render(catalog).items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        written.append(path)
    return written


def main() -> None:
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else DOCS
    for path in export(target):
        print(path)


if __name__ == "__main__":
    main()
