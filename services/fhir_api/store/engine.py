"""Run searches on a connection: page, snapshot, totals, _include/_revinclude (:iterate), $everything."""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import BigInteger, Connection, Integer, Select, and_, bindparam, func, or_, select, union_all

from services.fhir_api.search.keys import param_keys
from services.fhir_api.search.registry import get_param
from services.fhir_api.store import cursor
from services.fhir_api.store import models as m
from services.fhir_api.store import query as q
from services.fhir_api.store.connections import rows_of
from services.fhir_api.store.interface import (
    Context,
    Cursor,
    InvalidSearch,
    SearchRequest,
    SearchResult,
    StoredResource,
)
from services.fhir_api.store.rows import stored_resource

MAX_INCLUDE_ROUNDS = 4
ESTIMATE_CAP = 10_000


def fetch(conn: Connection, rids: list[int]) -> list[StoredResource]:
    """Current resources by rid, in the given order."""
    if not rids:
        return []
    r, v = m.resource, m.version
    rows = conn.execute(
        select(r.c.rid, r.c.session, r.c.res_type, r.c.res_id, r.c.version, r.c.last_updated)
        .add_columns(v.c.raw, v.c.method)
        .join(v, v.c.seq == r.c.seq)
        .where(r.c.rid.in_(rids))
    ).all()
    by_rid = {row.rid: row for row in rows}
    return [stored_resource(row, row.rid) for rid in rids if (row := by_rid.get(rid)) is not None]


@dataclass(frozen=True)
class Template:
    """The statements of one search shape, values bound by name: the matching rids, the page, the total."""

    page: Select
    total: Select | None
    cached: bool  # shared by every request of its shape (else built for one request)
    keys: tuple  # the page's sort keys, then rid (what a keyset cursor holds)


# Statements by search shape: building them costs several times what running them costs, and an assistant's
# searches come in few shapes. Bounded: a flood of odd shapes only rebuilds statements.
_TEMPLATES: dict[tuple, Template] = {}
MAX_TEMPLATES = 1024


@dataclass(frozen=True)
class Step:
    """One database round trip of a search: a prebuilt statement with its values, or (`call`) work that
    needs a SQLAlchemy connection. `search_steps` yields them and is sent their rows, so the same search runs
    on a thread's connection (`search`) or awaited on the event loop (store/async_reads.py)."""

    stmt: Select | None = None
    values: dict[str, Any] | None = None
    call: Callable[[Connection], Any] | None = None


SNAPSHOT = select(func.coalesce(func.max(m.version.c.seq), 0).label("snap"))


def search(conn: Connection, ctx: Context, request: SearchRequest) -> SearchResult:
    steps = search_steps(conn.dialect, ctx, request)
    try:
        step = next(steps)
        while True:
            step = steps.send(step.call(conn) if step.call else rows_of(conn, step.stmt, step.values or {}))
    except StopIteration as done:
        return done.value


def search_steps(dialect, ctx: Context, request: SearchRequest) -> Generator[Step, Any, SearchResult]:
    plan = q.plan_params(request.resource_type, request.params, ctx, request.strict)
    for _, _, value in _include_specs(request.params):
        _parse_include(value)  # reject malformed includes even when nothing matches
    if request.cursor is not None:
        cursor.fit(request.cursor, len(plan.sort) + 1)
    snapshot = request.snapshot
    if snapshot is None and (request.total != "none" or request.count <= 0):
        snapshot = (yield Step(SNAPSHOT, {}))[0][0]  # the total and the page count against one cutoff
    template = _template(dialect, ctx, request, plan, snapshot is not None)
    values = {**plan.values, **q.context_values(ctx), "page_limit": request.count + 1}
    values["page_offset"] = request.offset
    if snapshot is not None:
        values["snapshot"] = snapshot
    if request.cursor is not None:
        values.update(cursor.bind_values(request.cursor, template.keys))

    def run(stmt: Select) -> Step:
        return Step(stmt, values) if template.cached else Step(call=lambda c: c.execute(stmt, values).all())

    total = (yield run(template.total))[0][0] if template.total is not None else None
    result = SearchResult([], [], total, plan.used, False, snapshot, has_previous=request.offset > 0)
    if request.count > 0:
        rows = yield run(template.page)
        n = len(template.keys) - 1  # the sort keys' columns k0..k<n-1>, then rid
        page = cursor.window(
            result,
            rows,
            request.count,
            request.cursor,
            request.offset,
            lambda row: (*(getattr(row, f"k{i}") for i in range(n)), row.rid),
        )
        result.matches = [stored_resource(row, row.rid) for row in page]
        if result.snapshot is None:
            result.snapshot = rows[0].snap if rows else (yield Step(SNAPSHOT, {}))[0][0]
    if total is None and request.total != "none" and not result.has_next and request.cursor is None:
        result.total = request.offset + len(result.matches)
    if result.matches and _include_specs(request.params):
        result.includes = yield Step(call=lambda c: _includes(c, ctx, result.matches, request.params))
    return result


def _template(dialect, ctx: Context, request: SearchRequest, plan: q.Plan, pinned: bool) -> Template:
    """The cached statements for this request's shape (built, warmed and cached on first use)."""
    shape = plan.key
    key = None
    if shape is not None:
        at = (request.cursor.direction, cursor.nulls(request.cursor)) if request.cursor else None
        key = (request.resource_type, shape, q.context_shape(ctx), pinned, request.total, at, dialect.name)
        found = _TEMPLATES.get(key)
        if found is not None:
            return found
    r = q.R
    cutoff = bindparam("snapshot", type_=BigInteger) if pinned else _snapshot_expr()
    filters = plan.where(r, postgres=dialect.name == "postgresql")
    stmt = q.base_select(request.resource_type, ctx, r).where(r.c.created_seq <= cutoff, *filters)
    keys = q.sort_keys(request.resource_type, plan.sort, r, ctx)
    page = _page(stmt, keys, cutoff, r, request.cursor)
    built = Template(page, _total(stmt, request.total), key is not None, (*(k for k, _ in keys), r.c.rid))
    if key is not None:
        for statement in (built.page, built.total):
            if statement is not None:  # settle lazily built parts before other threads share the statement
                statement.compile(dialect=dialect)
        if len(_TEMPLATES) >= MAX_TEMPLATES:
            _TEMPLATES.clear()
        _TEMPLATES[key] = built
    return built


def _snapshot_expr():
    """The change-sequence cutoff computed inside the page query itself (saves a round trip on page one)."""
    return select(func.coalesce(func.max(m.version.c.seq), 0)).scalar_subquery()


def _page(stmt: Select, keys: list, cutoff, r, at: Cursor | None) -> Select:
    """One statement for a page: the ordered rids (count + 1, to know whether a page follows) joined to the
    raw JSON of just those rows, plus the snapshot it ran against. From a keyset cursor, if any: a page
    before it walks the order backwards (the outer query puts the rows back in forward order)."""
    labelled = [key.label(f"k{i}") for i, (key, _) in enumerate(keys)]
    cols = (r.c.rid, r.c.seq, r.c.session, r.c.res_type, r.c.res_id, r.c.version, r.c.last_updated)
    inner = stmt.with_only_columns(*cols, *labelled, cutoff.label("snap"))
    if at is not None:
        inner = inner.where(cursor.beyond(keys, r.c.rid, at.direction, cursor.nulls(at)))
    inner = inner.order_by(*cursor.walk(keys, r.c.rid, at))
    page = (
        inner.limit(bindparam("page_limit", type_=Integer))
        .offset(bindparam("page_offset", type_=BigInteger))  # _offset runs to 2**62 (http/params.py)
        .subquery("page")
    )
    v = m.version
    outer_keys = [(page.c[f"k{i}"], desc) for i, (_, desc) in enumerate(keys)]
    return (
        select(page, v.c.raw, v.c.method)
        .join(v, v.c.seq == page.c.seq)
        .order_by(*q.ordering(outer_keys), page.c.rid)
    )


def _total(stmt: Select, mode: str) -> Select | None:
    if mode == "accurate":
        return select(func.count()).select_from(stmt.subquery())
    if mode == "estimate":
        return select(func.count()).select_from(stmt.limit(ESTIMATE_CAP).subquery())
    return None


def includes_asked(request: SearchRequest) -> bool:
    return any(name.partition(":")[0] in ("_include", "_revinclude") for name, _ in request.params)


def _include_specs(params: list[tuple[str, str]]) -> list[tuple[str, bool, str]]:
    specs = []
    for name, value in params:
        kind, _, mod = name.partition(":")
        if kind in ("_include", "_revinclude"):
            if mod not in ("", "iterate", "recurse"):
                raise InvalidSearch(f"unknown modifier on {name}")
            specs.append((kind, bool(mod), value))
    return specs


def _parse_include(value: str) -> tuple[str, str, str | None]:
    if value == "*":  # every reference of (or to) the matches
        return "*", "*", None
    parts = value.split(":")
    if len(parts) not in (2, 3) or not all(parts):
        raise InvalidSearch(f"'{value}' is not Type:parameter[:targetType]")
    if parts[1] != "*" and (
        get_param(parts[0], parts[1]) is None or get_param(parts[0], parts[1]).type != "reference"
    ):
        raise InvalidSearch(f"'{parts[1]}' is not a reference parameter of {parts[0]}")
    return parts[0], parts[1], parts[2] if len(parts) == 3 else None


def _includes(conn: Connection, ctx: Context, matches: list[StoredResource], params) -> list[StoredResource]:
    specs = _include_specs(params)
    if not specs:
        return []
    seen = {(s.resource_type, s.id) for s in matches}
    frontier, out = list(matches), []
    for round_no in range(MAX_INCLUDE_ROUNDS):
        found: list[int] = []
        for kind, iterate, value in specs:
            if round_no and not iterate:
                continue
            src_type, pname, target = _parse_include(value)
            pool = [s for s in frontier if kind == "_revinclude" or src_type in ("*", s.resource_type)]
            if pool:
                found += (forward_rids if kind == "_include" else _reverse)(
                    conn, ctx, pool, src_type, pname, target
                )
        new = [s for s in fetch(conn, list(dict.fromkeys(found))) if (s.resource_type, s.id) not in seen]
        seen.update((s.resource_type, s.id) for s in new)
        out += new
        frontier = new
        if not new:
            break
    return out


def _by_type(pool: list[StoredResource]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for res in pool:
        groups.setdefault(res.resource_type, []).append(res.id)
    return groups


def _key_rids(conn: Connection, ctx: Context, pool: list[StoredResource]) -> list[int]:
    """The rows the context sees of the pool's resources. A search's matches and includes carry their rows
    (they are rows the context sees); otherwise one select per type, so each reads the key index (an OR
    over the types made SQLite read every row of the session)."""
    if all(s.rid is not None for s in pool):
        return [s.rid for s in pool]  # type: ignore[misc]
    r = q.R
    by_type = [
        select(r.c.rid).where(q.visible(r, ctx), r.c.res_type == t, r.c.res_id.in_(ids))
        for t, ids in _by_type(pool).items()
    ]
    return list(conn.execute(by_type[0] if len(by_type) == 1 else union_all(*by_type)).scalars())


def forward_rids(conn, ctx, pool, src_type, pname, target) -> list[int]:
    """Resources the pool refers to through src_type:pname (or every reference param for '*')."""
    return referenced_rids(conn, ctx, _key_rids(conn, ctx, pool), src_type, pname, target)


def referenced_rids(
    conn: Connection, ctx: Context, rids: list[int], src_type: str = "*", pname: str = "*", target=None
) -> list[int]:
    """The rows the context sees of what the rows `rids` refer to through src_type:pname ('*': every
    reference parameter)."""
    ref, t = m.reference, q.T
    stmt = (
        select(t.c.rid)
        .select_from(ref)
        .join(t, and_(t.c.res_type == ref.c.target_type, t.c.res_id == ref.c.target_id))
        .where(ref.c.rid.in_(rids), q.visible(t, ctx))
    )
    if pname != "*":  # the rows are read by rid: the parameter's index would walk every resource's rows
        stmt = stmt.where(q.in_param(ref, None if src_type == "*" else src_type, pname, ctx, by_rid=True))
    if target:
        stmt = stmt.where(t.c.res_type == target)
    return list(conn.execute(stmt).scalars())


def _reverse(conn, ctx, pool, src_type, pname, target) -> list[int]:
    """Resources of src_type that refer to the pool through pname."""
    ref, s = m.reference, q.S
    keys = [and_(ref.c.target_type == t, ref.c.target_id.in_(ids)) for t, ids in _by_type(pool).items()]
    stmt = select(s.c.rid).select_from(ref).join(s, s.c.rid == ref.c.rid).where(or_(*keys), q.visible(s, ctx))
    if pname != "*":  # by the search index's leading key
        stmt = stmt.where(q.in_param(ref, None if src_type == "*" else src_type, pname, ctx))
    elif src_type != "*":
        stmt = stmt.where(ref.c.param_key.in_(param_keys(src_type, "reference")))
    return list(conn.execute(stmt).scalars())
