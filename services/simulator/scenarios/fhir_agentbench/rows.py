"""FHIR-AgentBench's question file, read whole before anything is imported: the peer's published CSV format
(`final_dataset/questions_answers_sql_fhir.csv`) taken unchanged.

Every row is checked first; the first bad one stops the import with its row (1 = the first question under
the header), its question id and the column (`BadRow`), so nothing is half-imported. The gold answer is the
SQL result as the peer's scripts print it: a Python literal (`[[1]]`, `[['M']]`, `[[None]]`, `[]`) or numpy's
print of several rows (`[['a']\\n ['b']]`, no commas between rows).
"""

from __future__ import annotations

import ast
import csv
import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

COLUMNS = ("question_id", "question", "sql_query", "true_answer", "assumption", "patient_fhir_id", "template",
           "main_table_name", "mappable_to_fhir", "true_fhir_ids")
_ROWS_APART = re.compile(r"\]\s+\[")  # numpy prints rows of a 2-D array without commas
_COUNT_EXISTS = re.compile(r"count\s*\(\s*\*\s*\)\s*>\s*0", re.IGNORECASE)  # the yes/no questions' SQL
_FHIR_ID = re.compile(r"^[A-Za-z0-9\-.]{1,64}$")


class BadRow(ValueError):
    """A row the importer cannot take: names the row, the question and the column."""

    def __init__(self, row: int, question_id: str, column: str, problem: str) -> None:
        self.row, self.column = row, column
        super().__init__(f"row {row} (question {question_id or '?'}), column {column}: {problem}")


@cache
def tables() -> dict[str, dict[str, Any]]:
    """EHRSQL's tables (data/tables.json): the FHIR types each maps to, the baseline's search."""
    path = Path(__file__).with_name("data") / "tables.json"
    return json.loads(path.read_text(encoding="utf-8"))["tables"]


@cache
def words() -> dict[str, Any]:
    """How the suite's baseline reads a question (data/tables.json `question_words`)."""
    path = Path(__file__).with_name("data") / "tables.json"
    return json.loads(path.read_text(encoding="utf-8"))["question_words"]


@dataclass(frozen=True)
class Question:
    row: int
    question_id: str
    question: str
    assumption: str
    patient: str  # the patient's FHIR id
    template: str
    main_table: str
    mappable: bool
    gold: list[list[Any]]  # the SQL result rows
    boolean: bool  # the SQL asks COUNT(*) > 0: [[1]] / [[0]] are yes / no
    gold_ids: dict[str, list[str]]  # resource type -> ids, as the file lists them
    split: str = ""


def read_questions(path: Path) -> list[Question]:
    """Every question of the file, or `BadRow` for the first row that is not one."""
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise BadRow(0, "", ", ".join(missing), "missing from the header")
        return [question(n, row) for n, row in enumerate(reader, 1)]


def question(n: int, row: dict[str, str | None]) -> Question:
    qid = (row.get("question_id") or "").strip()

    def bad(column: str, problem: str) -> BadRow:
        return BadRow(n, qid, column, problem)

    for column in COLUMNS:
        if row.get(column) is None:
            raise bad(column, "the row has no such cell (too few fields)")
    if not qid:
        raise bad("question_id", "empty")
    if not (row["question"] or "").strip():
        raise bad("question", "empty")
    patient = (row["patient_fhir_id"] or "").strip()
    if not _FHIR_ID.match(patient):
        raise bad("patient_fhir_id", f"not a FHIR id: {patient!r}")
    table = (row["main_table_name"] or "").strip()
    if table not in tables():
        raise bad("main_table_name", f"unknown table {table!r} (known: {', '.join(sorted(tables()))})")
    mappable = (row["mappable_to_fhir"] or "").strip().lower()
    if mappable not in ("true", "false"):
        raise bad("mappable_to_fhir", f"expected True or False, got {mappable!r}")
    return Question(row=n, question_id=qid, question=row["question"].strip(),  # type: ignore[union-attr]
                    assumption=(row["assumption"] or "").strip(), patient=patient,
                    template=(row["template"] or "").strip(), main_table=table, mappable=mappable == "true",
                    gold=_gold(row["true_answer"] or "", bad), boolean=bool(_COUNT_EXISTS.search(
                        row["sql_query"] or "")), gold_ids=_gold_ids(row["true_fhir_ids"] or "", bad),
                    split=(row.get("split") or "").strip())


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return ast.literal_eval(_ROWS_APART.sub("], [", text))


def _gold(text: str, bad) -> list[list[Any]]:
    try:
        value = _literal(text.strip())
    except (ValueError, SyntaxError) as exc:
        raise bad("true_answer", f"not a SQL result literal: {text[:80]!r} ({exc})") from None
    if not isinstance(value, list | tuple) or not all(isinstance(r, list | tuple) for r in value):
        raise bad("true_answer", f"expected a list of rows, got {text[:80]!r}")
    rows = [list(r) for r in value]
    for r in rows:
        for v in r:
            if v is not None and not isinstance(v, str | int | float | bool):
                raise bad("true_answer", f"a value of an unknown kind: {v!r}")
    return rows


def _gold_ids(text: str, bad) -> dict[str, list[str]]:
    try:
        value = ast.literal_eval(text.strip() or "{}")
    except (ValueError, SyntaxError) as exc:
        raise bad("true_fhir_ids", f"not a dict literal: {text[:80]!r} ({exc})") from None
    if not isinstance(value, dict):
        raise bad("true_fhir_ids", f"expected a dict of resource type -> ids, got {type(value).__name__}")
    out: dict[str, list[str]] = {}
    for kind, ids in value.items():
        if not isinstance(kind, str) or not re.match(r"^[A-Z][A-Za-z]+$", kind):
            raise bad("true_fhir_ids", f"not a resource type: {kind!r}")
        if not isinstance(ids, list | tuple) or not all(isinstance(i, str) and _FHIR_ID.match(i)
                                                         for i in ids):
            raise bad("true_fhir_ids", f"{kind}: expected a list of FHIR ids")
        out[kind] = list(dict.fromkeys(ids))
    return out
