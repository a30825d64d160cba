"""Streaming readers for the MIMIC-IV layout (`hosp/`, `icu/`, `ed/`, `note/`; `.csv.gz` or `.csv`).

Rows are checked against fhir_mapper/schema/mimic_iv_tables.json as they stream: a value that does
not parse as its column's type rejects that row (file:line, reason); a missing column skips the table;
a truncated or corrupt gzip ends the table at the line reached. Everything is reported, never raised.
"""

from __future__ import annotations

import csv
import gzip
import re
import sys
import zlib
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

import orjson

from fhir_mapper import progress
from fhir_mapper.report import RunReport

SCHEMA_PATH = Path(__file__).parent / "schema" / "mimic_iv_tables.json"
csv.field_size_limit(sys.maxsize)  # discharge notes are long

_INT = re.compile(r"-?\d+")
_FLOAT = re.compile(r"-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}( \d{2}:\d{2}:\d{2}(\.\d{1,6})?)?")
_PATTERNS = {"int": _INT, "float": _FLOAT, "date": _DATE, "datetime": _DATETIME}
_CHECKS: dict[str, Callable[[str], object]] = {name: p.fullmatch for name, p in _PATTERNS.items()}


@cache
def schema() -> dict[str, dict[str, str]]:
    return orjson.loads(SCHEMA_PATH.read_bytes())["tables"]


def table_path(root: Path, table: str) -> Path | None:
    for suffix in (".csv.gz", ".csv"):
        path = root / f"{table}{suffix}"
        if path.exists():
            return path
    return None


def _open(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return path.open("r", encoding="utf-8", newline="")


def _raw(handle):
    """The underlying binary file of a text handle (for its position in compressed bytes)."""
    buffer = handle.buffer
    return getattr(buffer, "fileobj", None) or getattr(buffer, "raw", buffer)


def read_table(
    root: Path, table: str, report: RunReport, columns: tuple[str, ...] | None = None
) -> Iterator[dict[str, str]]:
    """Yield each valid row of `table` as {column: text} ('' = NULL) plus `_line` (its line in the file);
    report everything else. With `columns`, rows carry (and are type-checked on) those columns only,
    which keeps wide tables such as emar_detail cheap."""
    path = table_path(root, table)
    if path is None:
        report.missing_tables.add(table)
        return
    types = schema()[table]
    name = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
    count = reported = 0
    reader = None
    try:
        with _open(path) as handle:
            reader = csv.reader(handle)
            header = next(reader, None) or []
            missing = [c for c in types if c not in header]
            if missing:
                report.skipped_tables[table] = f"{name}: missing column(s) {', '.join(missing)}"
                return
            wanted = columns or tuple(header)
            checks = [(header.index(c), c, t) for c, t in types.items() if t in _CHECKS and c in wanted]
            picks = [(c, header.index(c)) for c in wanted]
            typed = [i for i, _c, _t in checks]
            # One regex over the typed fields joined by \x1f; per-column checks only to name a culprit.
            whole = re.compile("\x1f".join(f"(?:{_PATTERNS[t].pattern})?" for _i, _c, t in checks))
            width = len(header)
            raw = _raw(handle)
            reported = 0
            for row in reader:
                count += 1
                if not count & 0x3FFF:  # every 16,384 rows: report the compressed bytes consumed
                    position = raw.tell()
                    progress.consumed(position - reported)
                    reported = position
                if len(row) != width:
                    report.reject(table, name, reader.line_num, f"{len(row)} fields, expected {width}")
                    continue
                if typed and not whole.fullmatch("\x1f".join([row[i] for i in typed])):
                    bad = next(
                        ((c, t, row[i]) for i, c, t in checks if row[i] and not _CHECKS[t](row[i])), None
                    )
                    col, typ, value = bad or ("row", "typed row", "")
                    report.reject(table, name, reader.line_num, f"{col}: {value!r} is not a valid {typ}")
                    continue
                record = {c: row[i] for c, i in picks} if columns else dict(zip(header, row, strict=True))
                record["_line"] = reader.line_num
                yield record
    except (EOFError, gzip.BadGzipFile, zlib.error, OSError, UnicodeDecodeError, csv.Error) as exc:
        line = reader.line_num + 1 if reader is not None else 1
        report.reject(table, name, line, f"unreadable from here on ({type(exc).__name__}: {exc})")
    finally:
        report.rows_read[table] = count
        progress.consumed(path.stat().st_size - reported)
