"""The shared record's session key is one constant (SHARED_RECORD) and one SQL text (SHARED_RECORD_SQL): no
module of the store, the FHIR API or the event backbone compares a session with a bare '' or puts it in SQL.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from events.payloads.outcome import SHARED_RECORD
from services.fhir_api.store.interface import Context, StoredResource
from services.fhir_api.store.models import SHARED_RECORD_SQL

REPO = Path(__file__).resolve().parents[3]
SESSION = re.compile(r"session")  # the names a session key goes by (session, session_id, r.c.session)
RAW_SQL = re.compile(r"session\s*(=|<>|!=|IN)\s*\(?\s*''", re.IGNORECASE)


def _names(node: ast.AST) -> str:
    return ast.unparse(node) if isinstance(node, ast.Attribute | ast.Name) else ""


def _bare(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == ""


def _compares_a_session_with_bare(node: ast.AST) -> bool:
    if not isinstance(node, ast.Compare):
        return False
    sides = [node.left, *node.comparators]
    return any(SESSION.search(_names(n)) for n in sides) and any(
        _bare(n) or isinstance(n, ast.Tuple | ast.List | ast.Set) and any(map(_bare, n.elts)) for n in sides)


def _lists_bare_beside_a_session(node: ast.AST) -> bool:
    """`column.in_([..., ''])` on a session column."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "in_" \
        and bool(SESSION.search(_names(node.func.value))) and any(
            isinstance(a, ast.Tuple | ast.List | ast.Set) and any(map(_bare, a.elts)) for a in node.args)


def _defaults_a_session_to_bare(node: ast.AST) -> bool:
    return isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and _bare(node.values[-1]) \
        and bool(SESSION.search(_names(node.values[0])))


def _in_raw_sql(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and bool(RAW_SQL.search(node.value))


def spelled(source: str) -> list[int]:
    """Lines comparing a session with '' (==, !=, in), defaulting one to '' (`x.session_id or ''`), or
    writing '' for it in SQL text."""
    checks = (_compares_a_session_with_bare, _lists_bare_beside_a_session, _defaults_a_session_to_bare,
              _in_raw_sql)
    return sorted({node.lineno for node in ast.walk(ast.parse(source)) if any(c(node) for c in checks)})


def test_the_check_sees_each_spelling() -> None:
    source = ("a = r.c.session == ''\nb = ctx.session_id or ''\nc = v.session.in_({x, ''})\n"
              "d = \"JOIN fhir_resource r ON r.session = '' AND\"\ne = r.c.session == SHARED_RECORD\n")
    assert spelled(source) == [1, 2, 3, 4]


def test_no_module_spells_the_shared_record_as_a_bare_literal() -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{line}"
        for top in ("events", "services/fhir_api")
        for path in (REPO / top).rglob("*.py")
        for line in spelled(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_the_constant_is_what_the_store_reads_and_writes() -> None:
    assert Context().session_key == SHARED_RECORD == StoredResource("Patient", "p", 1, None, b"").session
    assert Context(session_id="s1").session_key == "s1"
    assert f"'{SHARED_RECORD}'" == SHARED_RECORD_SQL
