"""The hand-kept module lists stay complete: a module that defines CLI commands, tables or a replayable
projection but is missing from its list fails here (read from the source, nothing imported to find them).

- rounds/registry.py COMMAND_MODULES: every module with a module-level `register(app)`;
- events/cli.py SUBCOMMAND_MODULES: every module with `register_subcommands(events_app)`;
- rounds/migrate.py MODEL_MODULES: every module declaring a table on `foundation.db.Base`'s metadata (a
  mapped class with `__tablename__`, or a Core `Table(...)` given `Base.metadata`);
- events/projections/replay.py PROJECTIONS: every Projection subclass in events/ that sets its own `name`.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

from events.cli import SUBCOMMAND_MODULES
from events.projections.replay import PROJECTIONS
from rounds.migrate import MODEL_MODULES
from rounds.registry import COMMAND_MODULES

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("foundation", "rounds", "contracts", "events", "services", "fhir_mapper")


@lru_cache(maxsize=1)
def modules() -> dict[str, ast.Module]:
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = ast.parse(path.read_text(), str(path))
    return found


def defining_function(name: str) -> set[str]:
    return {module for module, tree in modules().items()
            if any(isinstance(node, ast.FunctionDef) and node.name == name for node in tree.body)}


def _classes(tree: ast.Module) -> list[ast.ClassDef]:
    return [node for node in tree.body if isinstance(node, ast.ClassDef)]


def _assigns(cls: ast.ClassDef, name: str) -> bool:
    return any((isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets))
               or (isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == name)
               for node in cls.body)


def _bases(cls: ast.ClassDef) -> set[str]:
    return {getattr(base, "id", getattr(base, "attr", None)) for base in cls.bases}


def test_every_command_module_is_registered() -> None:
    assert set(COMMAND_MODULES) == defining_function("register"), (
        "add the module's commands to rounds/registry.py COMMANDS (or give it a register(app) function)")
    assert len(COMMAND_MODULES) == len(set(COMMAND_MODULES))


def test_every_events_subcommand_module_is_registered() -> None:
    assert set(SUBCOMMAND_MODULES) == defining_function("register_subcommands")


def _declares_tables(tree: ast.Module) -> bool:
    if any("Base" in _bases(cls) and _assigns(cls, "__tablename__") for cls in _classes(tree)):
        return True
    aliases = {"Base.metadata"} | {target.id for node in tree.body if isinstance(node, ast.Assign)
                                   and ast.unparse(node.value) == "Base.metadata"
                                   for target in node.targets if isinstance(target, ast.Name)}
    # Table(name, Base.metadata, ...), or declare_default_tables(schema, Base.metadata): a projection's
    declaring = ("Table", "declare_default_tables")
    return any(isinstance(node, ast.Call) and getattr(node.func, "id", None) in declaring
               and len(node.args) > 1 and ast.unparse(node.args[1]) in aliases
               for node in ast.walk(tree))


def test_every_model_module_is_listed() -> None:
    declaring = {module for module, tree in modules().items() if _declares_tables(tree)}
    assert "events.blobs" in declaring and "services.fhir_api.store.models" in declaring  # the scan works
    assert set(MODEL_MODULES) == declaring, "add the module to rounds/migrate.py MODEL_MODULES"


def test_every_projection_in_events_is_replayable_by_name() -> None:
    declared = {cls.name for module, tree in modules().items() if module.startswith("events.")
                for cls in _classes(tree) if "Projection" in _bases(cls) and _assigns(cls, "name")}
    assert declared == {cls.__name__ for cls in PROJECTIONS.values()}, (
        "add the projection to events/projections/replay.py PROJECTIONS")
