"""The command table (rounds/registry.py COMMANDS) is what the modules register, and `rounds --help` is
drawn from it alone: no command's module, and nothing of the house below, is imported to list them."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import typer
import typer.main

from rounds.registry import COMMAND_MODULES, COMMANDS

REPO = Path(__file__).resolve().parents[2]


def _first_paragraph(text: str) -> str:
    return " ".join(text.split("\n\n", 1)[0].split())


def test_each_module_registers_exactly_its_commands_with_their_summaries() -> None:
    for module in COMMAND_MODULES:
        owned = typer.Typer()
        importlib.import_module(module).register(owned)
        registered = typer.main.get_group(owned).commands
        listed = {entry.name: entry.summary for entry in COMMANDS if entry.module == module}
        assert set(registered) == set(listed), f"{module}: rounds/registry.py COMMANDS lists {sorted(listed)}"
        for name, command in registered.items():
            assert listed[name] == _first_paragraph(command.short_help or command.help or ""), (
                f"rounds {name}: its summary in rounds/registry.py is not the first paragraph of its help")


def test_the_root_help_imports_no_command() -> None:
    code = ("import sys\nfrom rounds.cli import app\n"
            "try:\n    app(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "{'services', 'fhir_mapper', 'events', 'sqlalchemy', 'pydantic'} or m in "
            f"{COMMAND_MODULES!r}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "scenarios" in done.stdout and done.stdout.strip().splitlines()[-1] == "[]"


def test_a_subcommand_still_shows_all_its_options() -> None:
    from typer.testing import CliRunner

    from rounds.cli import app

    shown = CliRunner().invoke(app, ["load", "--help"])
    assert shown.exit_code == 0, shown.output
    assert all(option in shown.output for option in ("--ndjson", "--database-url", "--workers", "--validate"))
