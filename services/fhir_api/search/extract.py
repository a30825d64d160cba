"""Run the compiled path programs over a resource and produce its search-index rows.

A program step is ("f", name) a plain element, ("c", name, types) a choice element restricted to types,
("r", Type) keep references that point to Type, ("w", key, value) keep elements whose key equals value.
Each path is turned into a Python closure once per resource type (`_plan`), and a parameter whose paths start
from elements the resource lacks is skipped: bulk load runs this for every resource, so it is the hot path —
`index_tuples` runs each shape's plan as one generated function (codegen.py), `interpreted_index_tuples` is
the plain interpretation it is tested against. Rows are (param, param_key, *value columns) tuples, in the
index table's column order. Both add the rows of composites over a repeating element (`_pairs`: an element's
value rows keyed by its token part's coding, store/composite.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cache, lru_cache

from services.fhir_api.search.codegen import generate
from services.fhir_api.search.keys import pair_label, param_key
from services.fhir_api.search.registry import ROW_COLUMNS, pairs_stored_as, params_for, stored_as
from services.fhir_api.search.values import (
    TEXT_MAX,
    date_range,
    decimal_range,
    normalize,
    parse_reference,
    period_range,
)

IndexTuples = dict[str, list[tuple]]  # index type -> (param, param_key, *columns) in table column order
Path = Callable[[dict], list]  # compiled path program: resource -> nodes

KINDS = ("token", "string", "date", "number", "quantity", "reference", "uri")
COLUMNS: dict[str, tuple[str, ...]] = {
    "token": ("system", "code", "text"),
    "string": ("norm", "exact"),
    "date": ("low", "high"),
    "number": ("value",),
    "quantity": ("value", "system", "code", "unit"),
    "reference": ("target_type", "target_id", "url"),
    "uri": ("value",),
}


def _children(node: object, name: str) -> list[object]:
    value = node.get(name) if type(node) is dict else None
    return [] if value is None else value if type(value) is list else [value]


def _field(nodes: list[object], name: str) -> list[object]:
    out: list[object] = []
    for node in nodes:
        if type(node) is dict and (value := node.get(name)) is not None:
            if type(value) is list:
                out.extend(value)
            else:
                out.append(value)
    return out


def _step(step: tuple) -> Callable[[list], list]:
    kind = step[0]
    if kind == "f":
        name = step[1]
        return lambda nodes: _field(nodes, name)
    if kind == "c":
        names = _choice_names(step[1], step[2])
        return lambda nodes: [c for name in names for c in _field(nodes, name)]
    if kind == "r":
        target = step[1]
        return lambda nodes: [n for n in nodes if isinstance(n, dict) and _ref_type(n) == target]
    if kind == "w":
        key, value = step[1], step[2]
        return lambda nodes: [n for n in nodes if isinstance(n, dict) and n.get(key) == value]
    if kind == "x":  # the element exists: the boolean true (Patient.deceased from deceasedDateTime)
        return lambda nodes: [True] if nodes else []
    return lambda nodes: nodes


@cache
def compile_path(steps: tuple[tuple, ...]) -> Path:
    """A closure running the steps from a resource (the first plain element is read directly)."""
    fns = [_step(s) for s in steps]
    if steps and steps[0][0] == "f":
        name = steps[0][1]

        def first(resource: dict) -> list:
            value = resource.get(name)
            return [] if value is None else value if type(value) is list else [value]

        fns[0] = first
    else:
        head = fns[0] if fns else (lambda nodes: nodes)
        fns[0:1] = [lambda resource: head([resource])]
    if len(fns) == 1:
        return fns[0]
    start, rest = fns[0], fns[1:]

    def run(resource: dict) -> list:
        nodes = start(resource)
        for fn in rest:
            if not nodes:
                break
            nodes = fn(nodes)
        return nodes

    return run


def run_path(resource: dict, steps: Iterable[tuple]) -> list[object]:
    return compile_path(tuple(steps))(resource)


@cache
def _choice_names(name: str, types: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(name + t[0].upper() + t[1:] for t in types)


def _ref_type(node: dict) -> str | None:
    ref = node.get("reference")
    return parse_reference(ref)[0] if type(ref) is str else None


def first_keys(steps: tuple[tuple, ...]) -> tuple[str, ...]:
    """The top-level keys a path starts from (a choice element's every `value[x]` name): a resource without
    any of them gives the path nothing, so a plan skips it (index extraction, the store's known-time rule)."""
    first = steps[0]
    return _choice_names(first[1], first[2]) if first[0] == "c" else (first[1],)


Extractor = Callable[[object, str, dict, tuple], list[tuple]]  # node, FHIR type, rows, row head -> values
PlanEntry = tuple[str, str, Extractor, tuple[tuple[frozenset[str], Path, str, tuple], ...], bool]


@cache
def _plan(resource_type: str) -> tuple[PlanEntry, ...]:
    """(name, type, extractor, (top-level keys, compiled path, FHIR type, steps) per union branch, own rows)
    of every supported parameter except _id and those whose rows other parameters' rows repeat
    (registry.stored_as). A repeating reference parameter stays, without rows of its own, for the
    ':identifier' rows only its own filter selects."""
    plan = []
    for param in params_for(resource_type).values():
        if param.unsupported or param.name in ROW_COLUMNS or param.type == "composite":  # no rows of its own
            continue
        own = stored_as(resource_type, param.name) == ((param.name, None),)
        if own or param.type == "reference":
            paths = tuple((frozenset(first_keys(s)), compile_path(s), ftype, s) for s, ftype in param.paths)
            plan.append((param.name, param.type, _EXTRACTORS[param.type], paths, own))
    return tuple(plan)


@lru_cache(maxsize=4096)
def _applicable(
    resource_type: str, shape: tuple[str, ...]
) -> tuple[tuple[str, str, Extractor, tuple, bool], ...]:
    """The plan for a resource with these top-level keys: only branches starting from a present key (the
    others find nothing), only parameters with such a branch."""
    out = []
    for name, ptype, extract, branches, own in _plan(resource_type):
        paths = tuple((path, ftype, s) for keys, path, ftype, s in branches if not keys.isdisjoint(shape))
        if paths:
            out.append((name, ptype, extract, paths, own))
    return tuple(out)


def _cut(text: object) -> str | None:
    if type(text) is str:
        return text if len(text) <= TEXT_MAX else text[:TEXT_MAX]
    return str(text)[:TEXT_MAX] if text is not None else None


def _label(text: object) -> str | None:
    return normalize(text) if text else None


def _tokens(node: object, ftype: str) -> list[tuple]:
    if type(node) is dict:  # the common case first (bulk load meets ~3.5 per resource)
        return _dict_tokens(node, ftype)
    if isinstance(node, bool):
        return [(None, "true" if node else "false", None)]
    if isinstance(node, str | int):
        return [(None, _cut(node), None)]
    return _dict_tokens(node, ftype) if isinstance(node, dict) else []


def _dict_tokens(node: dict, ftype: str) -> list[tuple]:
    if ftype == "ContactPoint":
        return [(None, _cut(node.get("value")), None)]
    if "coding" in node or ftype == "CodeableConcept":
        text = node.get("text")
        coding = node.get("coding", [])
        if text:  # the concept's text labels each of its codings
            label = normalize(text)
            out = [(_cut(c.get("system")), _cut(c.get("code")), label) for c in coding]
            if not coding:
                out.append((None, None, label))
            return out
        return [(_cut(c.get("system")), _cut(c.get("code")), _label(c.get("display"))) for c in coding]
    if "value" in node and ftype != "Coding":  # Identifier
        label = _label((node.get("type") or {}).get("text"))
        return [(_cut(node.get("system")), _cut(node.get("value")), label)]
    if "code" in node or "system" in node:  # Coding
        return [(_cut(node.get("system")), _cut(node.get("code")), _label(node.get("display")))]
    return []


_STRING_PARTS = (
    "text",
    "family",
    "given",
    "prefix",
    "suffix",
    "line",
    "city",
    "district",
    "state",
    "postalCode",
    "country",
)


def _strings(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):  # HumanName, Address: every textual part
        return [v for part in _STRING_PARTS for v in _children(node, part) if isinstance(v, str)]
    return []


def _dates(node: object) -> list[tuple[int, int]]:
    rng = None
    if isinstance(node, str):
        rng = date_range(node)
    elif isinstance(node, dict):
        if "start" in node or "end" in node:
            rng = period_range(node)
        elif "event" in node:  # Timing
            return [r for event in node["event"] for r in _dates(event)]
    return [rng] if rng else []


def _number(value: object) -> float | None:
    if type(value) is float:  # JSON numbers are finite; float(Decimal(str(x))) == x
        return value
    if type(value) is int and -(2**53) <= value <= 2**53:  # exact as a float: what the Decimal path gives
        return float(value)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    parsed = decimal_range(str(value))
    return parsed[0] if parsed else None


def _quantities(node: object) -> list[tuple]:
    if isinstance(node, dict) and (value := _number(node.get("value"))) is not None:
        return [(value, _cut(node.get("system")), _cut(node.get("code")), _cut(node.get("unit")))]
    return []


def _references(node: object, rows: IndexTuples, head: tuple) -> list[tuple]:
    if type(node) is not dict:
        if isinstance(node, str):  # canonical
            return [(None, None, node[:1024])]
        if not isinstance(node, dict):
            return []
    ref = node.get("reference")
    row = _reference_row(ref) if ref and type(ref) is str else None
    if "identifier" in node and isinstance(node["identifier"], dict):  # for the :identifier modifier
        ident = _IDENTIFIER_HEADS[head]
        rows["token"].extend(ident + row for row in _tokens(node["identifier"], "Identifier"))
    return [row] if row else []


@lru_cache(maxsize=65536)
def _reference_row(ref: str) -> tuple | None:
    """(target type, id, url) of a reference string — the same few thousand patients and encounters recur
    on every line of a load."""
    rtype, rid, url = parse_reference(ref)
    return (rtype, _cut(rid), url[:1024] if url else None) if rtype or rid or url else None


_EXTRACTORS: dict[str, Extractor] = {
    "token": lambda node, ftype, rows, name: _tokens(node, ftype),
    "string": lambda node, ftype, rows, name: [(normalize(t), t[:TEXT_MAX]) for t in _strings(node)],
    "date": lambda node, ftype, rows, name: _dates(node),
    "number": lambda node, ftype, rows, name: [] if (v := _number(node)) is None else [(v,)],
    "quantity": lambda node, ftype, rows, name: _quantities(node),
    "reference": lambda node, ftype, rows, head: _references(node, rows, head),
    "uri": lambda node, ftype, rows, name: [(node[:1024],)] if isinstance(node, str) else [],
}


_EMPTY = {kind: (None,) * len(columns) for kind, columns in COLUMNS.items()}  # a row that says nothing
_IDENTIFIER_HEADS: dict[tuple, tuple] = {}  # a reference parameter's row head -> its ':identifier' token head


def _head(resource_type: str, named: bool, name: str) -> tuple:
    """What every row of the parameter starts with: (param, param_key) named, else (param_key,)."""
    head = (name, param_key(resource_type, name)) if named else (param_key(resource_type, name),)
    ident = f"{name}:identifier"
    key = param_key(resource_type, ident)
    _IDENTIFIER_HEADS.setdefault(head, (ident, key) if named else (key,))
    return head


def index_tuples(resource: dict, named: bool = True) -> IndexTuples:
    """Every search-index row of one resource as (param, param_key, *columns), or as stored (param_key,
    *columns) when not `named`, grouped by index table: per parameter each distinct row once (first
    occurrence order), rows of only NULLs left out."""
    return _fused(resource.get("resourceType", ""), tuple(resource), named)(resource)


@cache
def _element_pairs(resource_type: str) -> tuple:
    """(composite, top-level keys, element path, token part (path, type), value part (kind, extractor, path,
    type)) of every composite over a repeating element of the type (Observation.component)."""
    out = []
    for param in params_for(resource_type).values():
        stores = param.type == "composite" and not param.unsupported
        if stores and pairs_stored_as(resource_type, param.name) == param.name:  # rows written once
            for element, ((_, token_steps, token_type), (kind, steps, ftype)) in param.elements:
                token = (compile_path(token_steps), token_type)
                value = (kind, _EXTRACTORS[kind], compile_path(steps), ftype)
                out.append((param.name, frozenset(first_keys(element)), compile_path(element), token, value))
    return tuple(out)


def _pairs_for(resource_type: str, shape: Iterable[str]) -> list[tuple]:
    """The `_element_pairs` whose element a resource with these top-level keys has."""
    keys = set(shape)
    return [pair for pair in _element_pairs(resource_type) if not pair[1].isdisjoint(keys)]


def _pair_rows(
    resource_type: str, resource: dict, rows: IndexTuples, named: bool, pairs: list[tuple]
) -> IndexTuples:
    """Add the rows of the composites over a repeating element (`pairs`: those the resource has)."""
    for name, _, element, token, value in pairs:
        rows[value[0]].extend(_pairs(resource_type, name, element(resource), token, value, named))
    return rows


def _pairs(resource_type: str, name: str, elements: list, token: tuple, value: tuple, named: bool) -> dict:
    """Per element, its value part's rows under the keys of its token part's codings (keys.pair_label): a
    search reads one key, so both parts it matches come from ONE element (composite.py)."""
    (token_path, token_type), (kind, extract, path, ftype) = token, value
    found: dict[tuple, None] = {}
    for node in elements:
        if type(node) is not dict:
            continue
        values = [v for n in path(node) for v in extract(n, ftype, None, (name,)) if v != _EMPTY[kind]]
        codings = {(s, c) for n in token_path(node) for s, c, _ in _tokens(n, token_type) if c}
        for system, code in codings if values else ():
            for label in (pair_label(name, system or "", code), pair_label(name, None, code)):
                key = param_key(resource_type, label)
                found.update(dict.fromkeys(((label, key) if named else (key,)) + v for v in values))
    return found


@lru_cache(maxsize=4096)
def _fused(resource_type: str, shape: tuple[str, ...], named: bool) -> Callable[[dict], IndexTuples]:
    """`interpreted_index_tuples` for this shape, generated as one function (search/codegen.py)."""
    entries = [
        (
            ptype,
            extract,
            _head(resource_type, named, name),
            _EMPTY[ptype],
            tuple((s, ftype, path) for path, ftype, s in paths),
            own,
        )
        for name, ptype, extract, paths, own in _applicable(resource_type, shape)
    ]
    generated = generate(entries, KINDS, shape, _CODEGEN_NAMES)
    pairs = _pairs_for(resource_type, shape)
    if not pairs:
        return generated  # decided once per shape: a lab result without components pays nothing

    def with_pairs(resource: dict) -> IndexTuples:
        return _pair_rows(resource_type, resource, generated(resource), named, pairs)

    return with_pairs


def interpreted_index_tuples(resource: dict, named: bool = True) -> IndexTuples:
    """`index_tuples` by interpreting the plan (the reference the generated functions are tested against)."""
    rows: IndexTuples = {k: [] for k in KINDS}
    rtype = resource.get("resourceType", "")
    for name, ptype, extract, paths, own in _applicable(rtype, tuple(resource)):
        head, found = _head(rtype, named, name), []
        for path, ftype, _ in paths:
            for node in path(resource):
                found += extract(node, ftype, rows, head)
        if found and own:
            unique = dict.fromkeys(found) if len(found) > 1 else found
            rows[ptype] += [head + row for row in unique if row != _EMPTY[ptype]]
    return _pair_rows(rtype, resource, rows, named, _pairs_for(rtype, resource))


_CODEGEN_NAMES = {f.__name__: f for f in (_tokens, _dates, _quantities, _references, _ref_type)}
