"""Fixtures for the mapper tests: one mapping of the real demo shared by the whole module."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

DEMO = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "mimic-iv-demo"


def read_ndjson(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def _references(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "reference" and isinstance(v, str):
                yield v
            else:
                yield from _references(v)
    elif isinstance(node, list):
        for v in node:
            yield from _references(v)


def dangling_references(out: Path, files) -> list[tuple[str, str]]:
    """(file, reference) for every reference that names no resource of the run."""
    resources = [(name, r) for name in files for r in read_ndjson(out / name)]
    known = {f"{r['resourceType']}/{r['id']}" for _, r in resources}
    return [(name, ref) for name, r in resources for ref in _references(r) if ref not in known]


@pytest.fixture(scope="session")
def demo_dir() -> Path:
    if not (DEMO / "hosp" / "patients.csv.gz").exists():
        pytest.skip(f"MIMIC-IV demo not found at {DEMO}")
    return DEMO.resolve()


@pytest.fixture(scope="session")
def demo_run(demo_dir: Path, demo_mapped: tuple[Path, dict, int]) -> tuple[Path, dict, int]:
    """The demo mapped once per test run (tests/conftest.py `demo_mapped`)."""
    return demo_mapped
