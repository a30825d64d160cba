"""As-of views: a shared resource as it stood at a session's clock `now`.

The rules are data (known_time.json `views`, per resource type): elements dated after `now` are removed,
and the elements that only exist because of them are removed or rewritten (an Encounter still going on
has no end, no discharge disposition and is in progress). References to resources the session cannot
see are removed too.
The same rules decide the index rows a clocked session searches (`timed_rows`), so a search never matches
what the view removed. A session's own writes are served and indexed as written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import lru_cache

import orjson

from services.fhir_api import json_numbers
from services.fhir_api.search.values import parse_reference, to_us
from services.fhir_api.store.interface import SHARED_RECORD, Context, StoredResource
from services.fhir_api.store.known_time import INHERIT, VIEWS, known_from

Key = tuple[str, str]  # (resource type, id)


def _get(node: object, path: list[str]) -> object:
    for name in path:
        if not isinstance(node, dict):
            return None
        node = node.get(name)
    return node


def _remove(node: dict, path: list[str]) -> None:
    """Remove the element at path; parents left empty go with it."""
    parent = _get(node, path[:-1]) if len(path) > 1 else node
    if isinstance(parent, dict) and path[-1] in parent:
        del parent[path[-1]]
        if not parent and len(path) > 1:
            _remove(node, path[:-1])


def _date_low(value: object) -> int | None:
    """When a dated element became known (known_time.py `known_from`: a date-only value at the end of its
    day in the record's zone)."""
    return known_from(value)


def _nodes(resource: dict, rule: dict) -> list:
    if "each" not in rule:
        return [resource]
    items = resource.get(rule["each"])
    return items if isinstance(items, list) else []


@lru_cache(maxsize=512)
def _split(path: str) -> list[str]:
    return path.split(".")


def apply(resource: dict, now: int) -> bool:
    """Rewrite `resource` (in place) as it stood at `now` (µs); True if anything changed."""
    changed = False
    for rule in VIEWS.get(resource.get("resourceType", ""), ()):
        path = _split(rule["date"])
        nodes = _nodes(resource, rule)
        for node in list(nodes):
            low = _date_low(_get(node, path))
            if low is None or low <= now:
                continue
            changed = True
            if rule.get("drop"):
                nodes.remove(node)
                continue
            _remove(node, path)
            for other in rule.get("remove", ()):
                _remove(node, _split(other))
            for name, value in rule.get("set", {}).items():
                if name in node and (not isinstance(value, dict) or "to" not in value):
                    node[name] = value
                elif name in node and node[name] in value["from"]:
                    node[name] = value["to"]
        if "each" in rule and not nodes and rule["each"] in resource:
            del resource[rule["each"]]
    return changed


def breakpoints(resource: dict) -> list[int]:
    """The instants (µs, ascending) at which the view of `resource` changes: the dates its rules compare."""
    found = set()
    for rule in VIEWS.get(resource.get("resourceType", ""), ()):
        path = _split(rule["date"])
        for node in _nodes(resource, rule):
            low = _date_low(_get(node, path))
            if low is not None:
                found.add(low)
    return sorted(found)


def references(node: object) -> list[Key]:
    """(type, id) of every relative literal Reference in a resource, in document order. Every clocked read
    walks each served body with it: collected into one list, not through a generator per nesting level
    (each `yield from` level costs again for every key found below it)."""
    found: list[Key] = []
    _collect_references(node, found)
    return found


def _collect_references(node: object, found: list[Key]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "reference" and isinstance(value, str):
                rtype, rid, _ = parse_reference(value)
                if rtype and rid:
                    found.append((rtype, rid))
            elif isinstance(value, (dict, list)):
                _collect_references(value, found)
    elif isinstance(node, list):
        for value in node:
            if isinstance(value, (dict, list)):
                _collect_references(value, found)


def _hidden_ref(value: object, hidden: set[Key]) -> bool:
    if not isinstance(value, dict) or not isinstance(value.get("reference"), str):
        return False
    rtype, rid, _ = parse_reference(value["reference"])
    return (rtype, rid) in hidden


def strip(node: object, hidden: set[Key]) -> bool:
    """Remove (in place) every Reference to a key in `hidden`; True if any was."""
    changed = False
    if isinstance(node, dict):
        for key in list(node):
            value = node[key]
            if _hidden_ref(value, hidden):
                del node[key]
                changed = True
            elif isinstance(value, dict | list):
                changed |= strip(value, hidden)
                if isinstance(value, list) and not value:
                    del node[key]
    elif isinstance(node, list):
        keep = [value for value in node if not _hidden_ref(value, hidden)]
        changed = len(keep) != len(node)
        node[:] = keep
        for value in node:
            changed |= strip(value, hidden)
    return changed


def timed_views(resource: dict, own_time: int | None) -> list[tuple[int | None, int | None, dict]]:
    """The distinct views of a shared resource over time: (from, until, view) with `from` None for "since
    the resource is visible" and `until` None for "from then on" (the last is the resource itself). Empty
    when the resource looks the same at every clock that shows it."""
    cuts = [b for b in breakpoints(resource) if own_time is None or b > own_time]
    if not cuts:
        return []
    out: list[tuple[int | None, int | None, dict]] = []
    starts: list[int | None] = [None, *cuts]
    for i, start in enumerate(starts):
        until = cuts[i] if i < len(cuts) else None
        view = orjson.loads(json_numbers.dumps(resource))  # a deep copy (a body's decimals are JsonDecimal)
        apply(view, (cuts[0] - 1) if start is None else start)
        out.append((start, until, view))
    return out


Lookup = Callable[[set[Key]], set[Key]]  # referenced keys -> those the context cannot see


def present(
    ctx: Context, items: list[StoredResource], hidden_of: Lookup, seen: frozenset[Key] = frozenset()
) -> list[StoredResource]:
    """What a clocked session is served of stored resources: shared ones as they stood at its clock, without
    References to what it cannot see. Without a clock (the shared record, a session without `now`) they are
    served as stored. Parsed fast first; only what changes is parsed again keeping decimals as written.
    `seen`: keys the caller knows the context sees (a search's own matches and includes), not looked up."""
    if ctx.now is None:
        return items
    shared = [
        (i, it) for i, it in enumerate(items) if it.session == SHARED_RECORD and not it.deleted and it.raw
    ]
    if not shared:
        return items
    now = to_us(ctx.now)
    parsed = {i: orjson.loads(item.raw) for i, item in shared}
    changed = {i for i, body in parsed.items() if apply(body, now)}
    wanted: set[Key] = set()
    for body in parsed.values():
        wanted.update(references(body))
    wanted -= seen
    hidden = hidden_of(wanted) if wanted else set()
    if hidden:
        changed |= {i for i, body in parsed.items() if strip(body, hidden)}
    if not changed:
        return items
    out = list(items)
    for i in changed:
        body = json_numbers.loads(items[i].raw)  # the same rewrite, decimals kept as written
        apply(body, now)
        strip(body, hidden)
        out[i] = replace(items[i], raw=json_numbers.dumps(body))
    return out


def inherited_params(resource_type: str) -> Iterable[str]:
    return INHERIT.get(resource_type, ())
