"""Property test over the mapped MIMIC-IV demo: a session at `now` never serves the future.

For 200 random (patient, now) pairs, 100 drawn on each backend with a seed of its own, and random read
paths (read, vread, searches with _sort/_include/_revinclude, $everything, instance history), no returned
element carries a date after `now` and no returned Reference points at a resource the session cannot read;
searches on status agree with the served views.
The demo is mapped with the project's mapper; 25 patients (seeded) and everything they refer to are loaded
(conftest.py `demo_store`, shared with test_search_sees_the_view.py).
"""

from __future__ import annotations

import os
import random
import re
from datetime import UTC, datetime

import orjson
import pytest

from services.fhir_api.search.values import date_range, from_us, to_us
from services.fhir_api.store.interface import Context, SearchRequest
from services.fhir_api.store.views import references

PAIRS = int(os.environ.get("ROUNDS_AS_OF_PAIRS", "100"))  # per backend: 200 distinct pairs over the two
SEEDS = {"sqlite": 2026, "postgresql": 2027}
_DATE = re.compile(r"^\d{4}-\d{2}(-\d{2}(T[\d:.]+(Z|[+-]\d{2}:\d{2})?)?)?$")  # codes like 5990 are no dates
# A recorded value, known when the Observation was issued (the resource is hidden until then), may name a
# later date (a planned change of a line); it is a value, not a time of the record.
VALUE_DATES = {("Observation", "valueDateTime")}


def _dates(node: object, rtype: str, path: str = "") -> list[tuple[str, str]]:
    out = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key != "meta" and (rtype, key) not in VALUE_DATES:
                out += _dates(value, rtype, f"{path}.{key}" if path else key)
    elif isinstance(node, list):
        for value in node:
            out += _dates(value, rtype, path)
    elif isinstance(node, str) and _DATE.match(node):
        out.append((path, node))
    return out


def _paths(pid: str, rng: random.Random) -> list[tuple[str, object]]:
    searches = [
        ("Observation", [("patient", pid), ("category", "laboratory")]),
        ("Encounter", [("patient", pid), ("_sort", "-date")]),
        ("Encounter", [("patient", pid), ("_revinclude", "Condition:encounter")]),
        ("Condition", [("patient", pid), ("_include", "Condition:encounter")]),
        ("MedicationRequest", [("patient", pid), ("_include", "MedicationRequest:medication")]),
        ("MedicationDispense", [("patient", pid), ("_include", "MedicationDispense:prescription")]),
        ("MedicationAdministration", [("patient", pid), ("_include", "MedicationAdministration:request")]),
        ("Procedure", [("patient", pid), ("_sort", "date")]),
        ("Specimen", [("patient", pid)]),
        ("Observation", [("patient", pid), ("_include", "Observation:has-member")]),
    ]
    chosen = rng.sample(searches, 3)
    return [("search", s) for s in chosen] + [("everything", pid), ("read", ("Patient", pid))]


def _served(store, ctx: Context, kind: str, arg) -> list:
    if kind == "search":
        rtype, params = arg
        result = store.search(ctx, SearchRequest(rtype, params, count=30))
        return [*result.matches, *result.includes]
    if kind == "everything":
        result = store.everything(ctx, arg, count=50)
        return [*result.matches, *result.includes]
    return [store.read(ctx, *arg)]


def _check(store, ctx: Context, now: int, served: list, where: str, readable: dict) -> int:
    """Assert the property on served resources; returns how many elements were checked. Whether a referenced
    resource is readable is asked the store by `_id` searches (one per type, remembered per session)."""
    checked = 0
    bodies = [(item, orjson.loads(item.raw)) for item in served]
    unknown: dict[str, set[str]] = {}
    for _, body in bodies:
        for rtype, rid in references(body):
            if (rtype, rid) not in readable:
                unknown.setdefault(rtype, set()).add(rid)
    for rtype, ids in unknown.items():
        found = store.search(ctx, SearchRequest(rtype, [("_id", ",".join(sorted(ids)))], count=len(ids)))
        seen = {s.id for s in found.matches}
        readable.update({(rtype, rid): rid in seen for rid in ids})
    for item, body in bodies:
        for path, value in _dates(body, item.resource_type):
            checked += 1
            low = date_range(value)[0]
            assert low <= now, f"{where}: {item.resource_type}/{item.id} {path}={value} after {from_us(now)}"
        for key in references(body):
            assert readable[key], f"{where}: {item.resource_type}/{item.id} refers to hidden {key}"
    return checked


@pytest.mark.timeout(1800)  # 100 pairs of several reads each: minutes on a busy 2-core machine
def test_no_path_serves_the_future_for_200_random_sessions(demo_store) -> None:
    store, spans = demo_store
    rng = random.Random(SEEDS[store.engine.dialect.name])
    checked = served_total = 0
    for _ in range(PAIRS):
        pid = rng.choice(sorted(spans))
        first, last = spans[pid]
        now = rng.randint(first, last)
        ctx = store.get_session(store.create_session(datetime.fromtimestamp(now / 1e6, UTC)))
        now = to_us(ctx.now)
        readable: dict = {}
        for kind, arg in _paths(pid, rng):
            served = _served(store, ctx, kind, arg)
            served_total += len(served)
            checked += _check(store, ctx, now, served, f"{kind} {arg} at {ctx.now}", readable)
            for item in rng.sample(served, min(1, len(served))):  # vread and history of what was served
                again = store.vread(ctx, item.resource_type, item.id, item.version_id)
                versions, _, _ = store.history(ctx, item.resource_type, item.id)
                checked += _check(store, ctx, now, [again, *versions], f"history of {item.id}", readable)
        ongoing = store.search(ctx, SearchRequest("Encounter", [("patient", pid)], count=200)).matches
        in_progress = store.search(
            ctx, SearchRequest("Encounter", [("patient", pid), ("status", "in-progress")], count=200)
        ).matches
        assert {e.id for e in in_progress} == {
            e.id for e in ongoing if orjson.loads(e.raw)["status"] == "in-progress"
        }
        store.drop_session(ctx.session_id)
    print(f"\n{PAIRS} (patient, now) pairs: {served_total} resources served, {checked} dated elements")
    assert checked > 10 * PAIRS and served_total > 10 * PAIRS


def test_100_concurrent_sessions_count_only_what_they_wrote(demo_store) -> None:
    """100 sessions at once, each at a clock before its patient's first event, write one Specimen, Condition
    and Observation for the patient, then count them patient-scoped: each count is 1. (A shared Specimen
    with no collection time was visible at every clock: one such session counted 2 Specimens.)"""
    from concurrent.futures import ThreadPoolExecutor

    store, spans = demo_store
    pids = sorted(spans)
    bodies = {
        "Specimen": {"resourceType": "Specimen", "type": {"text": "blood"}},
        "Condition": {"resourceType": "Condition", "code": {"text": "new"}},
        "Observation": {"resourceType": "Observation", "status": "final", "code": {"text": "new"}},
    }

    def session(n: int) -> dict[str, int]:
        pid = pids[n % len(pids)]
        before = datetime.fromtimestamp(spans[pid][0] / 1e6 - 86400, UTC)
        ctx = store.get_session(store.create_session(before))
        for body in bodies.values():
            store.create(ctx, {**body, "subject": {"reference": f"Patient/{pid}"}})
        counts = {}
        for rtype in bodies:
            request = SearchRequest(rtype, [("patient", pid)], count=0, total="accurate")
            counts[rtype] = store.search(ctx, request).total
        store.drop_session(ctx.session_id)
        return counts

    with ThreadPoolExecutor(8) as pool:
        counts = list(pool.map(session, range(100)))
    wrong = [(n, c) for n, c in enumerate(counts) if set(c.values()) != {1}]
    assert not wrong, f"{len(wrong)} of 100 sessions counted other than what they wrote: {wrong[:5]}"
