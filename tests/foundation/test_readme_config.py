"""README.md's configuration table lists every ROUNDS_* setting the settings classes read (rounds/settings.py
and every other pydantic BaseSettings with the ROUNDS_ prefix), and nothing that no code reads."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic_settings import BaseSettings

from rounds.settings import Settings
from services.fhir_api.backbone.wiring import BackboneSettings

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("rounds", "events", "services", "fhir_mapper")


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


def test_every_setting_is_in_the_readme_table() -> None:
    assert settings_classes() == ["BackboneSettings", "Settings"]  # a new settings class: add it below
    missing = (read_by(Settings) | read_by(BackboneSettings)) - documented()
    assert missing == set(), f"add to README.md's configuration table: {sorted(missing)}"


def test_every_documented_setting_is_read_somewhere() -> None:
    code = "\n".join(p.read_text() for package in PACKAGES for p in (REPO / package).rglob("*.py"))
    stale = {name for name in documented()
             if name not in read_by(Settings) | read_by(BackboneSettings) and name not in code}
    assert stale == set(), f"README.md documents settings no code reads: {sorted(stale)}"
