"""Run the compiled path programs over a resource and produce its search-index rows.

A program step is ("f", name) a plain element, ("c", name, types) a choice element restricted to types,
("r", Type) keep references that point to Type, ("w", key, value) keep elements whose key equals value.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import cache

from services.fhir_api.search.registry import SearchParam, params_for, patient_compartment
from services.fhir_api.search.values import (
    TEXT_MAX,
    date_range,
    decimal_range,
    normalize,
    parse_reference,
    period_range,
)

IndexRows = dict[str, list[dict]]  # index type -> rows (without rid / res_type)


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


def run_path(resource: dict, steps: Iterable[tuple]) -> list[object]:
    nodes: list[object] = [resource]
    for step in steps:
        kind = step[0]
        if kind == "f":
            nodes = _field(nodes, step[1])
        elif kind == "c":
            nodes = [c for name in _choice_names(step[1], step[2]) for c in _field(nodes, name)]
        elif kind == "r":
            nodes = [n for n in nodes if isinstance(n, dict) and _ref_type(n) == step[1]]
        elif kind == "w":
            nodes = [n for n in nodes if isinstance(n, dict) and n.get(step[1]) == step[2]]
        if not nodes:
            break
    return nodes


@cache
def _choice_names(name: str, types: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(name + t[0].upper() + t[1:] for t in types)


def _ref_type(node: dict) -> str | None:
    return parse_reference(node.get("reference", ""))[0]


@cache
def _plan(resource_type: str) -> tuple[tuple[SearchParam, frozenset[str]], ...]:
    """Supported parameters of a type with the top-level keys their paths start from (to skip fast)."""
    plan = []
    for param in params_for(resource_type).values():
        if param.unsupported or param.name == "_id":
            continue
        keys: set[str] = set()
        for steps, _ in param.paths:
            first = steps[0]
            keys.update(_choice_names(first[1], first[2]) if first[0] == "c" else (first[1],))
        plan.append((param, frozenset(keys)))
    return tuple(plan)


def _cut(text: object) -> str | None:
    return str(text)[:TEXT_MAX] if text is not None else None


def _tokens(node: object, ftype: str) -> Iterator[dict]:
    if isinstance(node, bool):
        yield {"system": None, "code": "true" if node else "false", "text": None}
    elif isinstance(node, str | int):
        yield {"system": None, "code": _cut(node), "text": None}
    elif isinstance(node, dict):
        if ftype == "ContactPoint":
            yield {"system": None, "code": _cut(node.get("value")), "text": None}
        elif "coding" in node or ftype == "CodeableConcept":
            text = node.get("text")
            for coding in node.get("coding", []):
                label = text or coding.get("display")
                yield {
                    "system": _cut(coding.get("system")),
                    "code": _cut(coding.get("code")),
                    "text": normalize(label) if label else None,
                }
            if text and not node.get("coding"):
                yield {"system": None, "code": None, "text": normalize(text)}
        elif "value" in node and ftype != "Coding":  # Identifier
            label = (node.get("type") or {}).get("text")
            yield {
                "system": _cut(node.get("system")),
                "code": _cut(node.get("value")),
                "text": normalize(label) if label else None,
            }
        elif "code" in node or "system" in node:  # Coding
            label = node.get("display")
            yield {
                "system": _cut(node.get("system")),
                "code": _cut(node.get("code")),
                "text": normalize(label) if label else None,
            }


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


def _strings(node: object) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):  # HumanName, Address: every textual part
        for part in _STRING_PARTS:
            for value in _children(node, part):
                if isinstance(value, str):
                    yield value


def _dates(node: object) -> Iterator[dict]:
    rng = None
    if isinstance(node, str):
        rng = date_range(node)
    elif isinstance(node, dict):
        if "start" in node or "end" in node:
            rng = period_range(node)
        elif "event" in node:  # Timing
            for event in node["event"]:
                yield from _dates(event)
    if rng:
        yield {"low": rng[0], "high": rng[1]}


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    parsed = decimal_range(str(value))
    return parsed[0] if parsed else None


def _quantities(node: object) -> Iterator[dict]:
    if isinstance(node, dict) and (value := _number(node.get("value"))) is not None:
        yield {
            "value": value,
            "system": _cut(node.get("system")),
            "code": _cut(node.get("code")),
            "unit": _cut(node.get("unit")),
        }


def _references(node: object, rows: IndexRows, param: str) -> Iterator[dict]:
    if isinstance(node, str):  # canonical
        yield {"target_type": None, "target_id": None, "url": node[:1024]}
    elif isinstance(node, dict):
        if node.get("reference"):
            rtype, rid, url = parse_reference(node["reference"])
            if rtype or rid or url:
                yield {"target_type": rtype, "target_id": _cut(rid), "url": url[:1024] if url else None}
        if isinstance(node.get("identifier"), dict):  # for the :identifier modifier
            for row in _tokens(node["identifier"], "Identifier"):
                rows["token"].append({"param": f"{param}:identifier", **row})


def index_rows(resource: dict) -> IndexRows:
    """Every search-index row of one resource, grouped by index table."""
    rows: IndexRows = {k: [] for k in ("token", "string", "date", "number", "quantity", "reference", "uri")}
    present = resource.keys()
    for param, keys in _plan(resource.get("resourceType", "")):
        if not keys.isdisjoint(present):
            _index_param(resource, param, rows)
    return rows


def _string_rows(node: object, ftype: str, rows: IndexRows, name: str) -> Iterator[dict]:
    for text in _strings(node):
        yield {"norm": normalize(text), "exact": text[:TEXT_MAX]}


def _number_rows(node: object, ftype: str, rows: IndexRows, name: str) -> list[dict]:
    value = _number(node)
    return [] if value is None else [{"value": value}]


def _uri_rows(node: object, ftype: str, rows: IndexRows, name: str) -> list[dict]:
    return [{"value": node[:1024]}] if isinstance(node, str) else []


_EXTRACTORS = {
    "token": lambda node, ftype, rows, name: _tokens(node, ftype),
    "string": _string_rows,
    "date": lambda node, ftype, rows, name: _dates(node),
    "number": _number_rows,
    "quantity": lambda node, ftype, rows, name: _quantities(node),
    "reference": lambda node, ftype, rows, name: _references(node, rows, name),
    "uri": _uri_rows,
}


def _index_param(resource: dict, param: SearchParam, rows: IndexRows) -> None:
    seen: set = set()
    out = rows[param.type]
    extract = _EXTRACTORS[param.type]
    name = param.name
    for steps, ftype in param.paths:
        for node in run_path(resource, steps):
            for row in extract(node, ftype, rows, name):
                key = tuple(row.values())
                if key not in seen and key.count(None) < len(key):
                    seen.add(key)
                    out.append({"param": name, **row})


def compartment_patients(resource: dict) -> set[str]:
    """Ids of the Patients whose compartment holds this resource (per CompartmentDefinition-patient)."""
    rtype = resource.get("resourceType", "")
    found = {resource["id"]} if rtype == "Patient" and resource.get("id") else set()
    params = params_for(rtype)
    for name in patient_compartment().get(rtype, ()):
        param = params.get(name)
        if param is None or param.unsupported:
            continue
        for steps, _ in param.paths:
            for node in run_path(resource, steps):
                if isinstance(node, dict):
                    target_type, target_id, _ = parse_reference(node.get("reference", ""))
                    if target_type == "Patient" and target_id:
                        found.add(target_id)
    return found


# Elements that say when something clinically happened or became known, in the order tried. The clock hides a
# shared resource from a session whose `now` is before the latest of these the resource carries.
CLINICAL_TIME_ELEMENTS: tuple[tuple[tuple, ...], ...] = tuple(
    tuple(steps)
    for steps in (
        (("c", "effective", ("DateTime", "Period", "Instant", "Timing")),),
        (("f", "issued"),),
        (("f", "authoredOn"),),
        (("c", "onset", ("DateTime", "Period")),),
        (("f", "recordedDate"),),
        (("c", "occurrence", ("DateTime", "Period", "Timing")),),
        (("c", "performed", ("DateTime", "Period")),),
        (("f", "whenHandedOver"),),
        (("f", "whenPrepared"),),
        (("f", "collection"), ("c", "collected", ("DateTime", "Period"))),
        (("f", "receivedTime"),),
        (("f", "sent"),),
        (("f", "recorded"),),
        (("f", "period"),),
        (("f", "date"),),
    )
)


def clinical_time(resource: dict) -> int | None:
    """µs since the epoch when the resource happened/became known (max of the present elements' starts)."""
    if resource.get("resourceType") in ("Patient", "Organization", "Location", "Medication"):
        return None
    best: int | None = None
    for steps in CLINICAL_TIME_ELEMENTS:
        for node in run_path(resource, steps):
            for row in _dates(node):
                low = row["low"]
                if low > -(2**61) and (best is None or low > best):
                    best = low
    return best
