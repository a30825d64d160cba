"""Deterministic gzip CSV writers, one per table of fhir_mapper/schema/mimic_iv_tables.json.

Rows are dicts keyed by column name (absent or None = empty string, i.e. NULL); the header and column order
come from the schema, so the output is exactly what the readers expect. gzip headers carry no file name or
mtime, so the same rows give the same bytes.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path

SCHEMA_PATH = Path(__file__).parent.parent / "schema" / "mimic_iv_tables.json"


def schema() -> dict[str, dict[str, str]]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))["tables"]


class TableSet:
    """Open writers for every schema table under `root`; `write(table, row)` appends one row."""

    def __init__(self, root: Path, compresslevel: int = 4) -> None:
        self.root = root
        self.columns = {table: list(cols) for table, cols in schema().items()}
        self._allowed = {table: frozenset(cols) for table, cols in self.columns.items()}
        self.counts = dict.fromkeys(self.columns, 0)
        self._files: dict[str, tuple[gzip.GzipFile, io.TextIOWrapper]] = {}
        self._writers: dict[str, csv.writer] = {}
        for table, cols in self.columns.items():
            path = root / f"{table}.csv.gz"
            path.parent.mkdir(parents=True, exist_ok=True)
            raw = path.open("wb")
            gz = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=compresslevel)
            text = io.TextIOWrapper(gz, encoding="utf-8", newline="")
            self._files[table] = (raw, gz, text)
            writer = csv.writer(text, lineterminator="\n")
            writer.writerow(cols)
            self._writers[table] = writer

    def write(self, table: str, row: dict) -> None:
        if not row.keys() <= self._allowed[table]:
            raise KeyError(f"{table}: unknown column(s) {sorted(row.keys() - self._allowed[table])}")
        self._writers[table].writerow([row.get(col) for col in self.columns[table]])
        self.counts[table] += 1

    def close(self) -> None:
        for raw, gz, text in self._files.values():
            text.close()  # closes the GzipFile, which writes the trailer
            gz.close()
            raw.close()
        self._files.clear()

    def __enter__(self) -> TableSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
