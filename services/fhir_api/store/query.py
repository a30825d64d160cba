"""SearchRequest -> SQL: visibility (session overlay + clock), parameter filters, chains, _has, _sort.

The store executes what this module builds; this module never touches a connection.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Select,
    and_,
    bindparam,
    exists,
    false,
    func,
    literal,
    not_,
    or_,
    select,
    true,
)
from sqlalchemy.sql.elements import BindParameter, KeyedColumnElement

from services.fhir_api.search.keys import NO_PATIENT, as_of_key, patient_key, patient_rows, stored_keys
from services.fhir_api.search.registry import ROW_COLUMNS, SearchParam, get_param, params_for
from services.fhir_api.store import composite, conditions, modifiers, updated
from services.fhir_api.store import models as m
from services.fhir_api.store.asof import context_shape, context_values, row_clock, visible
from services.fhir_api.store.conditions import rid_filters
from services.fhir_api.store.filters import Binder, Filter
from services.fhir_api.store.interface import Context, InvalidSearch

__all__ = ["context_shape", "context_values", "visible"]  # the as-of rule (store/asof.py), as search uses it

RESULT_PARAMS = {
    "_count",
    "_offset",
    "_sort",
    "_include",
    "_revinclude",
    "_total",
    "_summary",
    "_elements",
    "_format",
    "_pretty",
    "_contained",
    "_containedType",
    "_totalMethod",
    "_getpagesoffset",
    "_snapshot",
    "_after",
    "_before",
    "_since",
    "_type",
}
# Named aliases of fhir_resource, built once: an alias builds its column proxies on first use, which was a
# good part of the Python cost of a search when every call made its own.
R, T, S = (m.resource.alias(name) for name in ("r", "t", "s"))
for _alias in (R, T, S):
    _alias.c  # noqa: B018 - build the proxies at import, not racing in the server's worker threads




def named(name: str, value: Any) -> BindParameter:
    """A bind a cached statement is run with (the request supplies `name`)."""
    return bindparam(name, value, expanding=isinstance(value, list))


def anonymous(name: str, value: Any) -> BindParameter:
    """A bind of a statement built for one request only (nested in chains and _has)."""
    return bindparam(name, value, unique=True, expanding=isinstance(value, list))


@dataclass
class Plan:
    """A parsed SearchRequest: everything that decides the SQL's form is in `key`, the rest in `values`."""

    filters: list[Filter] = field(default_factory=list)
    used: list[tuple[str, str]] = field(default_factory=list)
    sort: list[tuple[str, bool]] = field(default_factory=list)  # (param, descending)

    @property
    def key(self) -> tuple | None:
        keys = tuple(f.key for f in self.filters)
        return None if None in keys else (keys, tuple(self.sort))

    @property
    def values(self) -> dict[str, Any]:
        return {name: value for f in self.filters for name, value in f.values.items()}

    def where(self, r, postgres: bool = False) -> list[ColumnElement[bool]]:
        """The filters' conditions on r, values bound by name. With a driving filter (one reference by id:
        `patient=<id>`), every other filter that can is probed by rid on the driver's few rows instead of
        collecting its own rids from the whole store (a date range or a profile matches every patient's
        rows): the cost of a patient's search then follows the patient's chart, not the store."""
        driver = next((f for f in self.filters if f.drives), None)
        probed = [
            f for f in self.filters if driver is not None and f is not driver and f.probe and not f.narrowed
        ]
        conds, rid_sets = [], []
        for f in sorted(self.filters, key=lambda f: f is not driver):
            if any(f is p for p in probed):
                continue
            cond = f.make(r, named)
            (rid_sets if isinstance(cond, Select) else conds).append(cond)
        probes = lambda rid: [f.probe(rid, named) for f in probed]  # noqa: E731
        return conds + rid_filters(rid_sets, r, postgres, probes if probed else None)


def plan_params(resource_type: str | None, params: list[tuple[str, str]], ctx: Context, strict: bool) -> Plan:
    """Parse and check every parameter (InvalidSearch for malformed values) without building SQL."""
    out = Plan()
    patient = _patient_hint(resource_type, params)
    for name, value in params:
        if name in RESULT_PARAMS:
            if name == "_sort":
                out.sort.extend(_parse_sort(resource_type, value))
                out.used.append((name, value))
            elif name in ("_include", "_revinclude") or name.startswith(("_include:", "_revinclude:")):
                out.used.append((name, value))
            continue
        found = param_filter(resource_type, name, value, ctx, f"p{len(out.filters)}", patient=patient)
        if found is None:
            if strict:
                raise InvalidSearch(f"unknown or unsupported search parameter '{name}'")
            continue
        if "\x00" in value:  # no FHIR string holds one, and PostgreSQL text cannot
            raise InvalidSearch(f"the value of '{name}' contains a NUL character")
        out.filters.append(found)
        out.used.append((name, value))
    return out


def _patient_hint(resource_type: str | None, params: list[tuple[str, str]]) -> str | None:
    """The one Patient id a search is restricted to by a single plain `patient=<id>` (token rows carry their
    resource's patient: keys.patient_key), else None."""
    values = [value for name, value in params if name == "patient"]
    if not resource_type or not patient_rows(resource_type) or len(values) != 1:
        return None
    value = values[0].removeprefix("Patient/")
    return value if value and "/" not in value and "," not in value and "\\" not in value else None


def _parse_sort(resource_type: str | None, value: str) -> list[tuple[str, bool]]:
    keys = []
    for key in filter(None, value.split(",")):
        desc = key.startswith("-")
        name = key.lstrip("-")
        param = None if name in ROW_COLUMNS or not resource_type else get_param(resource_type, name)
        if name not in ROW_COLUMNS and param is None:
            raise InvalidSearch(f"cannot sort by unknown parameter '{name}'")
        if param is not None and param.type == "composite":
            raise InvalidSearch(f"cannot sort by composite parameter '{name}'")
        keys.append((name, desc))
    return keys


def _lookup(resource_type: str | None, name: str) -> SearchParam | None:
    if resource_type is None:
        return get_param("Patient", name) if name.startswith("_") else None
    return get_param(resource_type, name)


def param_condition(
    resource_type: str | None, name: str, value: str, ctx: Context, r
) -> ColumnElement | None:
    """Condition on alias r for one (name[:modifier][.chain], value) pair; None for unknown parameters."""
    found = param_filter(resource_type, name, value, ctx, "n")
    if found is None:
        return None
    cond = found.make(r, anonymous)
    return r.c.rid.in_(cond) if isinstance(cond, Select) else cond


def param_filter(
    resource_type: str | None, name: str, value: str, ctx: Context, prefix: str, *, patient: str | None = None
) -> Filter | None:
    """The Filter of one (name[:modifier][.chain], value) pair (binds named `prefix`…); None for unknown
    parameters. A plain positive filter makes the Select of its matching rids; a plain token one, in a search
    also restricted to `patient`, reads only the rows of resources of that patient (or of no single one)."""
    if name.startswith("_has:"):
        return Filter(None, {}, lambda r, bind: _has(resource_type, name, value, ctx, r))
    base, _, chain = name.partition(".")
    pname, _, modifier = base.partition(":")
    modifier = modifier or None
    if pname == "_id":
        if modifier not in (None, "not"):
            raise InvalidSearch(f"modifier :{modifier} is not supported on _id")

        def ids(r, bind: Binder) -> ColumnElement:
            cond = r.c.res_id.in_(bind(prefix, value.split(",")))
            return not_(cond) if modifier == "not" else cond

        return Filter(("_id", modifier), {prefix: value.split(",")}, ids)
    if pname == updated.NAME:  # the row's own column
        return Filter(*updated.filter_parts(value, modifier, prefix))
    param = _lookup(resource_type, pname)
    if param is None:
        return None
    if chain:
        return Filter(None, {}, lambda r, bind: _chain(param, modifier, chain, value, ctx, r))
    if param.absent is not None and modifier is None and param.absent in value.split(","):
        # a resource without the element has the `absent` value (deceased=false): "not the other one"
        opposite = {"true": "false", "false": "true"}[param.absent]
        if opposite in value.split(","):
            return Filter((name, "any"), {}, lambda r, bind: true())
        return param_filter(resource_type, f"{pname}:not", opposite, ctx, prefix, patient=patient)
    if param.type == "composite":  # each component by its own parameter, on the same resource
        component = lambda n, v, p: param_filter(resource_type, n, v, ctx, p, patient=patient)  # noqa: E731
        return Filter(*composite.filter_parts(param, modifier, value, prefix, component))
    table = m.INDEX_TABLES[param.type]
    if modifier == "missing":
        absent = modifiers.missing(value)

        def missing(r, bind: Binder) -> ColumnElement:
            of_param = in_param(table, resource_type, param.name, ctx)
            has_any = r.c.rid.in_(select(table.c.rid).where(of_param))
            return not_(has_any) if absent else has_any

        return Filter((name, value), {}, missing)
    kind, param_name = param.type, param.name
    if modifier == "identifier" and kind == "reference":
        table, kind, param_name = m.token, "token", f"{param.name}:identifier"
        parsed = [conditions.parse(kind, v, None) for v in conditions.split_values(value)]
    else:
        parsed = [conditions.parse(kind, v, modifier) for v in conditions.split_values(value)]
    slots = [(shape, [f"{prefix}_{i}_{j}" for j in range(len(vs))]) for i, (shape, vs) in enumerate(parsed)]
    bound = {f"{prefix}_{i}_{j}": v for i, (_, vs) in enumerate(parsed) for j, v in enumerate(vs)}
    narrow = patient is not None and kind == "token" and modifier is None
    if narrow:
        bound[f"{prefix}_patient"] = patient_key(patient)

    def matching(bind: Binder) -> ColumnElement:
        conds = [conditions.build(kind, table, shape, [bind(n, bound[n]) for n in ns]) for shape, ns in slots]
        found = or_(*conds)
        codes = [ns[-1] for shape, ns in slots if shape[0] in CODED]
        if kind == "token" and len(slots) > 1 and len(codes) == len(slots):
            # every value names its code: `code IN (…)` reads the index's (param_key, code, patient_key)
            # ranges, where the OR of (system, code) pairs alone reads every row of the parameter
            found = and_(table.c.code.in_([bind(n, bound[n]) for n in codes]), found)
        if narrow:  # a resource whose one patient is another cannot match patient=<this one>
            owner = bind(f"{prefix}_patient", bound[f"{prefix}_patient"])
            found = and_(found, table.c.patient_key.in_([owner, literal(NO_PATIENT, BigInteger)]))
        return found

    def hits(r, bind: Binder) -> ColumnElement | Select:
        hit = select(table.c.rid).where(in_param(table, resource_type, param_name, ctx), matching(bind))
        return not_(r.c.rid.in_(hit)) if modifier == "not" else hit

    def probe(rid, bind: Binder) -> ColumnElement:
        of_param = in_param(table, resource_type, param_name, ctx, by_rid=True)
        hit = exists().where(table.c.rid == rid, of_param, matching(bind))
        return not_(hit) if modifier == "not" else hit

    shapes = tuple(shape for shape, _ in parsed)
    drives = kind == "reference" and len(shapes) == 1 and shapes[0] in (("typed",), ("id",))
    return Filter((name, shapes, narrow), bound, hits, probe, drives, narrow)


CODED = ("code", "nosys", "sc")  # token shapes whose last value is the code (conditions.token)


def in_param(
    table, resource_type: str | None, name: str, ctx: Context | None = None, *, by_rid: bool = False
) -> ColumnElement[bool]:
    """Index rows answering parameter `name` of one type (or of every type defining it): by the index's
    leading key, and by target type where another parameter's reference rows serve it. `by_rid`: the caller
    reads one resource's rows by rid, so the key is compared as `param_key + 0`, which no index serves --
    SQLite (no statistics) otherwise walked all of the parameter's rows for every row it looked up. In a
    clocked session `ctx`, the rows its as-of views have at its `now` (store/asof.py `row_clock`)."""
    clock = row_clock(table, ctx) if ctx is not None else None
    by_target: dict[str | None, list[int]] = {}
    for key, target in stored_keys(resource_type, name):
        by_target.setdefault(target, []).append(key)
        if clock is not None:
            by_target[target].append(as_of_key(key))
    column = table.c.param_key + 0 if by_rid else table.c.param_key
    conds = []
    for target, keys in by_target.items():
        # listed as separate values, not one expanding list: prebuilt statements run straight on the driver
        cond = column == keys[0] if len(keys) == 1 else column.in_([literal(k, BigInteger) for k in keys])
        conds.append(and_(cond, table.c.target_type == target) if target else cond)
    found = or_(*conds) if len(conds) > 1 else conds[0] if conds else false()
    return found if clock is None else and_(found, clock)


def _of_type(column, resource_type: str | None) -> ColumnElement[bool]:
    """A literal type filter: never correlate index subqueries with the outer row (PostgreSQL would run them
    once per row)."""
    return column == resource_type if resource_type else true()


def _targets(param: SearchParam, modifier: str | None, chained: str) -> list[str]:
    if modifier:
        if modifier not in param.targets and param.targets:
            raise InvalidSearch(f"{param.name} cannot refer to {modifier}")
        return [modifier]
    return [
        t
        for t in param.targets
        if t in _known_types()
        and (chained.startswith("_") or chained.split(":")[0].split(".")[0] in params_for(t))
    ]


def _known_types() -> set[str]:
    from services.fhir_api.search.registry import resource_types

    return set(resource_types())


def _chain(param: SearchParam, modifier: str | None, chain: str, value: str, ctx: Context, r) -> Select:
    if param.type != "reference":
        raise InvalidSearch(f"'{param.name}' is not a reference parameter and cannot be chained")
    ref = m.reference
    branches = []
    for target in _targets(param, modifier, chain):
        t = m.resource.alias()
        inner = param_condition(target, chain, value, ctx, t)
        if inner is None:
            continue
        ids = select(t.c.res_id).where(t.c.res_type == target, visible(t, ctx), inner)
        branches.append(
            and_(or_(ref.c.target_type == target, ref.c.target_type.is_(None)), ref.c.target_id.in_(ids))
        )
    if not branches:
        raise InvalidSearch(f"cannot chain '{chain}' through '{param.name}'")
    return select(ref.c.rid).where(in_param(ref, param.resource_type, param.name, ctx), or_(*branches))


def _has(resource_type: str | None, name: str, value: str, ctx: Context, r) -> ColumnElement:
    parts = name.split(":", 3)
    if len(parts) != 4 or not all(parts[1:]):
        raise InvalidSearch(f"'{name}' is not _has:Type:reference:parameter")
    _, src_type, ref_name, rest = parts
    ref_param = get_param(src_type, ref_name)
    if ref_param is None or ref_param.type != "reference":
        raise InvalidSearch(f"'{ref_name}' is not a reference parameter of {src_type}")
    src = m.resource.alias()
    inner = param_condition(src_type, rest, value, ctx, src)
    if inner is None:
        raise InvalidSearch(f"unknown parameter '{rest}' on {src_type} in {name}")
    ref = m.reference
    ids = (
        select(ref.c.target_id)
        .join(src, src.c.rid == ref.c.rid)
        .where(
            in_param(ref, src_type, ref_name, ctx),
            or_(_of_type(ref.c.target_type, resource_type), ref.c.target_type.is_(None)),
            visible(src, ctx),
            inner,
        )
    )
    return r.c.res_id.in_(ids)


def sort_key(
    resource_type: str, name: str, desc: bool, r, ctx: Context | None = None
) -> KeyedColumnElement | ColumnElement:
    if name in ROW_COLUMNS:
        return r.c[ROW_COLUMNS[name]]
    param = get_param(resource_type, name)
    assert param is not None
    t = m.INDEX_TABLES[param.type]
    col = {
        "token": t.c.code if param.type == "token" else None,
        "string": getattr(t.c, "norm", None),
        "date": t.c.low if param.type == "date" else None,
        "reference": getattr(t.c, "target_id", None),
    }.get(param.type)
    col = col if col is not None else t.c.value
    agg = func.max(col) if desc else func.min(col)
    of_param = in_param(t, resource_type, name, ctx, by_rid=True)
    return select(agg).where(t.c.rid == r.c.rid, of_param).scalar_subquery()


def sort_keys(
    resource_type: str | None, sort: list[tuple[str, bool]], r, ctx: Context | None = None
) -> list[tuple[ColumnElement, bool]]:
    """(key, descending) per _sort key; callers append the insertion-order tie-break (rid)."""
    return [(sort_key(resource_type or "", name, desc, r, ctx), desc) for name, desc in sort]


def ordering(keys: list[tuple[ColumnElement, bool]]) -> list:
    return [key.desc().nulls_last() if desc else key.asc().nulls_last() for key, desc in keys]


def order_by(resource_type: str | None, sort: list[tuple[str, bool]], r) -> list:
    return [*ordering(sort_keys(resource_type, sort, r)), r.c.rid]


def base_select(resource_type: str | None, ctx: Context, r) -> Select:
    stmt = select(r.c.rid).where(visible(r, ctx))
    return stmt.where(r.c.res_type == resource_type) if resource_type else stmt
