"""README.md's configuration table lists every ROUNDS_* setting the settings classes read (rounds/settings.py
and every other pydantic BaseSettings with the ROUNDS_ prefix), and nothing that no code reads; row by row,
each variable's name, default and meaning are its field's (the table is written by
scripts/gen_config_table.py)."""

from __future__ import annotations

import importlib.util
import re
from itertools import zip_longest
from pathlib import Path
from types import ModuleType

from pydantic_settings import BaseSettings

from rounds.settings import Settings
from services.fhir_api.backbone.wiring import BackboneSettings

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("foundation", "rounds", "contracts", "events", "services", "fhir_mapper")


def documented() -> set[str]:
    readme = (REPO / "README.md").read_text()
    table = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `(ROUNDS_[A-Z0-9_]+)` \|", table, flags=re.M))


def read_by(settings: type[BaseSettings]) -> set[str]:
    prefix = settings.model_config.get("env_prefix", "")
    return {f"{prefix}{name}".upper() for name in settings.model_fields}


def settings_classes() -> list[str]:
    """Names of the BaseSettings classes declared in the project (so a new one cannot be forgotten here)."""
    found = []
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            found += re.findall(r"^class (\w+)\(BaseSettings\)", path.read_text(), flags=re.M)
    return sorted(found)


def generator() -> ModuleType:
    path = REPO / "scripts" / "gen_config_table.py"
    spec = importlib.util.spec_from_file_location("gen_config_table", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_setting_is_in_the_readme_table() -> None:
    assert settings_classes() == ["BackboneSettings", "Settings"]  # a new settings class: add it below
    missing = (read_by(Settings) | read_by(BackboneSettings)) - documented()
    assert missing == set(), f"add to README.md's configuration table: {sorted(missing)}"


def test_every_documented_setting_is_read_somewhere() -> None:
    code = "\n".join(p.read_text() for package in PACKAGES for p in (REPO / package).rglob("*.py"))
    stale = {name for name in documented()
             if name not in read_by(Settings) | read_by(BackboneSettings) and name not in code}
    assert stale == set(), f"README.md documents settings no code reads: {sorted(stale)}"


def test_each_row_is_its_fields_name_default_and_meaning() -> None:
    gen = generator()
    assert gen.settings_classes() == [Settings, BackboneSettings]
    _, _, table = gen.table_lines((REPO / "README.md").read_text())
    assert table[:2] == gen.HEADER
    for number, (written, field) in enumerate(zip_longest(table[2:], gen.rows()), start=1):
        assert written == field, (f"README.md configuration row {number} differs from its setting "
                                  "(run python scripts/gen_config_table.py)")
    assert len(documented()) == len(table) - 2  # each variable once
