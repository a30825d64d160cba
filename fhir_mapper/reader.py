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
from itertools import islice
from operator import itemgetter
from pathlib import Path
from typing import Any

import orjson

from fhir_mapper import progress
from fhir_mapper.ids import fhir_id
from fhir_mapper.report import RunReport
from rounds.shards import ALL, Shard

SCHEMA_PATH = Path(__file__).parent / "schema" / "mimic_iv_tables.json"
csv.field_size_limit(sys.maxsize)  # discharge notes are long

_INT = re.compile(r"-?\d+")
_FLOAT = re.compile(r"-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}( \d{2}:\d{2}:\d{2}(\.\d{1,6})?)?")
_PATTERNS = {"int": _INT, "float": _FLOAT, "date": _DATE, "datetime": _DATETIME}
_CHECKS: dict[str, Callable[[str], object]] = {name: p.fullmatch for name, p in _PATTERNS.items()}
_UNREADABLE = (EOFError, gzip.BadGzipFile, zlib.error, OSError, UnicodeDecodeError, csv.Error)


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
        handle = gzip.open(path, "rt", encoding="utf-8", newline="")  # noqa: SIM115 (the caller's `with`)
    else:
        handle = path.open("r", encoding="utf-8", newline="")  # noqa: SIM115
    handle._CHUNK_SIZE = 1 << 16  # decode 64 KiB at a time (default 8 KiB): fewer Python-level gzip reads
    return handle


def _raw(handle):
    """The underlying binary file of a text handle (for its position in compressed bytes)."""
    buffer = handle.buffer
    return getattr(buffer, "fileobj", None) or getattr(buffer, "raw", buffer)


_CHUNK = 4096  # rows read, type-checked and turned into records at a time
_SEP = "\x1f"
_COLUMN_CHECKS = {  # one regex over a whole column of a chunk (values joined by _SEP, each may be empty)
    name: re.compile(f"(?:{p.pattern})?(?:{_SEP}(?:{p.pattern})?)*").fullmatch
    for name, p in _PATTERNS.items()
}


def _column_ok(values: list[str], typ: str) -> bool:
    """Fast path: every value of a chunk's column is '' or valid. Integer columns are usually plain digits;
    dates and numbers (reference ranges, vital signs) repeat, so only distinct values are matched; a value
    holding the separator fails the count."""
    if typ == "int":
        digits = "".join(values)
        if digits.isdigit() and digits.isascii() or not digits:
            return True
    values = list(set(values))
    text = _SEP.join(values)
    return text.count(_SEP) == len(values) - 1 and _COLUMN_CHECKS[typ](text) is not None


def _row_problem(row: list[str], width: int, checks: list[tuple[int, str, str]]) -> str | None:
    if len(row) != width:
        return f"{len(row)} fields, expected {width}"
    for i, col, typ in checks:
        value = row[i]
        if value and not _CHECKS[typ](value):
            return f"{col}: {value!r} is not a valid {typ}"
    return None


def _problems(chunk: list[list[str]], width: int, checks: list[tuple[int, str, str]]) -> dict[int, str]:
    """{row index in chunk: reject reason}; column-wise fast checks, row by row only when one fails."""
    if set(map(len, chunk)) == {width} and all(
        _column_ok([row[i] for row in chunk], typ) for i, _col, typ in checks
    ):
        return {}
    found = ((k, _row_problem(row, width, checks)) for k, row in enumerate(chunk))
    return {k: reason for k, reason in found if reason}


def _line_numbers(chunk: list[list[str]], first: int, last: int) -> range | list[int]:
    """Each row's (last physical) line, as csv.reader.line_num gives it: consecutive unless quoted fields
    span lines (notes), then counted from the line breaks inside the fields."""
    if last - first == len(chunk):
        return range(first + 1, last + 1)
    lines, line = [], first
    for row in chunk:
        line += 1 + sum(f.count("\n") + f.count("\r") - f.count("\r\n") for f in row)
        lines.append(line)
    return lines


def read_table(
    root: Path, table: str, report: RunReport, columns: tuple[str, ...] | None = None, shard: Shard = ALL
) -> Iterator[dict[str, str]]:
    """Yield each valid row of `table` as {column: text} ('' = NULL) plus `_line` (its line in the file);
    report everything else. With `columns`, rows carry (and are type-checked on) those columns only,
    which keeps wide tables such as emar_detail cheap. Rows are read and checked in chunks of _CHUNK;
    rejects are reported in row order. With a `shard`, the rows of other shards' patients are left out
    (rounds/shards.py; a table without subject_id is every shard's)."""
    return _read(root, table, report, columns, columns, as_dict=True, shard=shard)


def read_tuples(
    root: Path,
    table: str,
    report: RunReport,
    columns: tuple[str, ...],
    checked: tuple[str, ...] | None,
    shard: Shard = ALL,
) -> Iterator[tuple]:
    """The hot tables' form of `read_table`: each valid row as a tuple of `columns` (in that order) and
    its line last, built by one C-level itemgetter instead of a dict. `checked` are the columns whose type
    is checked (None: every column of the table, as `read_table` without `columns`)."""
    return _read(root, table, report, columns, checked, as_dict=False, shard=shard)


def _shaper(header: list[str], columns: tuple[str, ...] | None, as_dict: bool) -> Callable[[list], Any]:
    """row (with its line appended) -> the record handed to the mapper."""
    wanted = columns or tuple(header)
    keys = (*wanted, "_line")
    if as_dict and columns is None:
        return lambda row: dict(zip(keys, row, strict=True))
    pick = itemgetter(*[header.index(c) for c in wanted], len(header))
    if as_dict:
        return lambda row: dict(zip(keys, pick(row), strict=True))
    return pick


def _sharded(shape: Callable[[list], Any], at: int, shard: Shard) -> Callable[[list], Any]:
    """`shape`, returning None for the rows of another shard's patient (which `_read` drops)."""

    def kept(row: list) -> Any:
        return shape(row) if shard.holds(fhir_id("Patient", row[at])) else None

    return kept


def _read(
    root: Path,
    table: str,
    report: RunReport,
    columns: tuple[str, ...] | None,
    checked: tuple[str, ...] | None,
    as_dict: bool,
    shard: Shard = ALL,
) -> Iterator:
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
            check_set = checked or tuple(header)
            checks = [(header.index(c), c, t) for c, t in types.items() if t in _CHECKS and c in check_set]
            width = len(header)
            shape = _shaper(header, columns, as_dict)
            if shard.count > 1 and "subject_id" in header:
                shape = _sharded(shape, header.index("subject_id"), shard)
            raw = _raw(handle)
            failure: Exception | None = None
            while failure is None:
                first, chunk = reader.line_num, []
                try:
                    chunk.extend(islice(reader, _CHUNK))  # keeps the rows read before an error
                except _UNREADABLE as exc:
                    failure = exc
                if not chunk:
                    break
                count += len(chunk)
                position = raw.tell()
                progress.consumed(position - reported)
                reported = position
                lines = _line_numbers(chunk, first, reader.line_num if failure is None else -1)
                problems = _problems(chunk, width, checks)
                if not problems:
                    for row, line in zip(chunk, lines, strict=True):
                        row.append(line)
                    yield from filter(None, map(shape, chunk)) if shard.count > 1 else map(shape, chunk)
                    continue
                for k, row in enumerate(chunk):
                    if k in problems:
                        report.reject(table, name, lines[k], problems[k])
                        continue
                    row.append(lines[k])
                    if (shaped := shape(row)) is not None:
                        yield shaped
            if failure is not None:
                raise failure
    except _UNREADABLE as exc:
        line = reader.line_num + 1 if reader is not None else 1
        report.reject(table, name, line, f"unreadable from here on ({type(exc).__name__}: {exc})")
    finally:
        report.rows_read[table] = count
        progress.consumed(path.stat().st_size - reported)
