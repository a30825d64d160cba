"""Fixtures for the mapper tests: one mapping of the real demo shared by the whole module."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

DEMO = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "mimic-iv-demo"


def read_ndjson(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


# Every "reference" key at any depth of a compact NDJSON line (a string value holding the same characters
# would be escaped, \"reference\", so only keys match): a byte scan, not a walk of every parsed resource.
REFERENCE = re.compile(rb'"reference":"((?:[^"\\]|\\.)*)"')


def dangling_references(out: Path, files) -> list[tuple[str, str]]:
    """(file, reference) for every reference that names no resource of the run."""
    known: set[str] = set()
    found: list[tuple[str, bytes]] = []
    for name in files:
        for line in (out / name).read_bytes().splitlines():
            head = orjson.loads(line)
            known.add(f"{head['resourceType']}/{head['id']}")
            found.extend((name, ref) for ref in REFERENCE.findall(line))
    refs = {ref: orjson.loads(b'"' + ref + b'"') for _, ref in found}
    return [(name, refs[ref]) for name, ref in found if refs[ref] not in known]


@pytest.fixture(scope="session")
def demo_dir() -> Path:
    if not (DEMO / "hosp" / "patients.csv.gz").exists():
        pytest.skip(f"MIMIC-IV demo not found at {DEMO}")
    return DEMO.resolve()


@pytest.fixture(scope="session")
def demo_run(demo_dir: Path, demo_mapped: tuple[Path, dict, int]) -> tuple[Path, dict, int]:
    """The demo mapped once per test run (tests/conftest.py `demo_mapped`)."""
    return demo_mapped
