"""The project's import graph, read from the source (AST) without importing anything.

An edge A -> B means module A imports B (or a name from B) at module level, including under
`if TYPE_CHECKING:` — a type-only import is still a dependency of the design, and a cycle hidden behind it is
the cycle the layering forbids. Imports inside functions are recorded separately (`lazy`): they run after
every module is loaded and are how the CLI and optional components load on demand. `cycles()` reads the
eager graph; `cycles(lazy=True)` and the floor rules (tests/foundation/floors.py) count them too, as does a
module loaded by name: a module that uses `importlib` depends on every project module a string literal in it
names ("pkg.mod" or "pkg.mod:attr"), which is how registries hide an import.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = ("foundation", "rounds", "contracts", "events", "services", "fhir_mapper")


@dataclass
class ImportGraph:
    modules: dict[str, Path]
    eager: dict[str, set[str]] = field(default_factory=dict)  # module level and TYPE_CHECKING
    lazy: dict[str, set[str]] = field(default_factory=dict)  # inside functions / methods

    def resolve(self, name: str) -> str | None:
        """The project module `name` refers to: itself, or the nearest enclosing project module/package."""
        while name and name not in self.modules:
            name = name.rpartition(".")[0]
        return name or None

    def edges(self, lazy: bool = True) -> dict[str, set[str]]:
        """Module -> the modules it imports (with `lazy`, also inside functions and by name)."""
        return {m: self.eager.get(m, set()) | (self.lazy.get(m, set()) if lazy else set())
                for m in self.modules}

    def cycles(self, lazy: bool = False) -> list[list[str]]:
        """Strongly connected components of more than one module (Tarjan, iterative) in the eager graph, or
        with `lazy` in the graph of every import."""
        graph = self.edges(lazy)
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        found: list[list[str]] = []
        for root in sorted(graph):
            if root in index:
                continue
            work = [(root, iter(sorted(graph[root])))]
            index[root] = low[root] = len(index)
            stack.append(root)
            on_stack.add(root)
            while work:
                node, children = work[-1]
                child = next(children, None)
                if child is not None:
                    if child not in index:
                        index[child] = low[child] = len(index)
                        stack.append(child)
                        on_stack.add(child)
                        work.append((child, iter(sorted(graph.get(child, ())))))
                    elif child in on_stack:
                        low[node] = min(low[node], index[child])
                    continue
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
        return found


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


Imported = tuple[str, str | None]  # (module, name imported from it)


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[Imported]:
    """(module, name) pairs of an import statement: `import X.Y` -> (X.Y, None); `from X import y` -> (X, y),
    y being a submodule of X or a name X defines (the caller decides, knowing the modules)."""
    if isinstance(node, ast.Import):
        return [(alias.name, None) for alias in node.names]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        source = ".".join([*base, node.module] if node.module else base)
    else:
        source = node.module or ""
    return [(source, alias.name) for alias in node.names]


def build(root: Path, packages: tuple[str, ...] = PACKAGES) -> ImportGraph:
    paths = [path for package in packages for path in sorted((root / package).rglob("*.py"))]
    graph = ImportGraph({_module_name(root, path): path for path in paths})
    for module, path in graph.modules.items():
        eager: set[tuple[str, str | None]] = set()
        lazy: set[tuple[str, str | None]] = set()
        is_package = path.name == "__init__.py"

        def visit(nodes: list[ast.stmt], module: str = module, is_package: bool = is_package,
                  eager: set = eager, lazy: set = lazy) -> None:
            for node in nodes:
                if isinstance(node, ast.Import | ast.ImportFrom):
                    eager.update(_imported(node, module, is_package))
                elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                    for inner in ast.walk(node):
                        if isinstance(inner, ast.Import | ast.ImportFrom):
                            lazy.update(_imported(inner, module, is_package))
                elif isinstance(node, ast.ClassDef):
                    visit(node.body)
                elif isinstance(node, ast.If):
                    visit(node.body)  # TYPE_CHECKING blocks included on purpose (module docstring)
                    visit(node.orelse)
                elif isinstance(node, ast.Try):
                    visit(node.body)
                    for handler in node.handlers:
                        visit(handler.body)
                    visit(node.orelse)
                    visit(node.finalbody)
                elif isinstance(node, ast.With | ast.For | ast.While):
                    visit(node.body)

        tree = ast.parse(path.read_text(), str(path))
        visit(tree.body)
        lazy.update(_loaded_by_name(tree, graph))
        graph.eager[module] = {r for pair in eager if (r := _target(graph, pair)) and r != module}
        graph.lazy[module] = {r for pair in lazy if (r := _target(graph, pair)) and r != module}
    return graph


def _loaded_by_name(tree: ast.Module, graph: ImportGraph) -> set[Imported]:
    """The project modules a module that uses importlib names in string literals ("a.b", "a.b:factory")."""
    uses_importlib = any(
        (isinstance(n, ast.Import) and any(a.name == "importlib" for a in n.names))
        or (isinstance(n, ast.ImportFrom) and n.module == "importlib" and any(a.name == "import_module"
                                                                             for a in n.names))
        for n in ast.walk(tree))
    if not uses_importlib:
        return set()
    names = {n.value.partition(":")[0] for n in ast.walk(tree)
             if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return {(name, None) for name in names if name in graph.modules}


def _target(graph: ImportGraph, pair: tuple[str, str | None]) -> str | None:
    """The project module an imported (module, name) depends on: the submodule when the name is one (a
    package's __init__ importing its submodules is no cycle with them), else the module defining the name.
    The parent package a submodule's import always runs first is not an edge."""
    source, name = pair
    if name is not None and f"{source}.{name}" in graph.modules:
        return f"{source}.{name}"
    return graph.resolve(source)
