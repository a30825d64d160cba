"""Write README.md's configuration table from the settings classes, one row per `ROUNDS_*` variable.

Each row is a field of `rounds.settings.Settings` or of the FHIR API's `BackboneSettings`: the variable's
name, its default (– when unset) and the field's docstring (pydantic's `use_attribute_docstrings`). Run it
after changing a setting; the README test (tests/foundation/test_readme_config.py) compares the table with
`rows()` line by line.

    python scripts/gen_config_table.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
HEADER = ["| variable | default | meaning |", "|---|---|---|"]


def settings_classes() -> list[type[BaseSettings]]:
    """Every settings class with the ROUNDS_ prefix, in the table's order."""
    sys.path.insert(0, str(REPO))
    from rounds.settings import Settings
    from services.fhir_api.backbone.wiring import BackboneSettings

    return [Settings, BackboneSettings]


def default_cell(field: FieldInfo) -> str:
    """The default as a user writes it in the environment: `true`/`false`, the value, or – for unset."""
    value = field.default
    if value is None:
        return "–"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def rows() -> list[str]:
    """One Markdown row per variable: name, default, meaning (the field's description)."""
    out = []
    for settings in settings_classes():
        prefix = settings.model_config.get("env_prefix", "")
        for name, field in settings.model_fields.items():
            if not field.description:
                raise ValueError(f"{settings.__name__}.{name} has no description for the README")
            variable = (prefix + name).upper()
            meaning = " ".join(field.description.split())  # the field's docstring, on one line
            out.append(f"| `{variable}` | {default_cell(field)} | {meaning} |")
    return out


def table_lines(readme: str) -> tuple[int, int, list[str]]:
    """Where the configuration table stands in README.md (first and past-last line) and its lines."""
    lines = readme.splitlines()
    start = lines.index("## Configuration")
    first = next(i for i in range(start, len(lines)) if lines[i].startswith("|"))
    last = next((i for i in range(first, len(lines)) if not lines[i].startswith("|")), len(lines))
    return first, last, lines[first:last]


def main() -> None:
    text = README.read_text()
    first, last, _ = table_lines(text)
    lines = text.splitlines()
    table = rows()
    lines[first:last] = HEADER + table
    README.write_text("\n".join(lines) + "\n")
    print(f"README.md: {len(table)} settings")


if __name__ == "__main__":
    main()
