"""A synthetic data set generated once per test session, and helpers to read it back."""

from __future__ import annotations

import csv
import gzip
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from fhir_mapper.synth import generate

csv.field_size_limit(sys.maxsize)
N_PATIENTS = 150


def rows(root: Path, table: str) -> Iterator[dict[str, str]]:
    with gzip.open(root / f"{table}.csv.gz", "rt", encoding="utf-8", newline="") as handle:
        yield from csv.DictReader(handle)


def ts(text: str) -> datetime:
    return datetime.fromisoformat(text)


@pytest.fixture(scope="session")
def synth_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("synth")
    generate(root, N_PATIENTS, seed=11)
    return root
