"""Property test over the mapped MIMIC-IV demo: a clocked session's search answers exactly what its views say.

For random (patient, clock) pairs, every resource of a few of the patient's resource types (always its
Encounters, the chains' targets) is read as the session is served it (its as-of view); those views are then
written, as they are, into a second session whose clock is before everything in the record, so that session
sees only them (its own writes are indexed as written, no clock applies to them). Every search parameter
the server supports for those types is then asked of both sessions with values taken from the served views
and from the full record (so values only the future holds are probed too) — plain, with date prefixes
around `now`, chained through the encounter, `_has`, `_include`/`_revinclude` and counts (`total`, what
`_summary=count` asks) — and the ids must be equal: no search matches or counts what a read hides.
`_lastUpdated` is left out (the copies are new versions); composite and special parameters are not probed.
Each backend draws its own pairs (its own seed): 40 distinct pairs in all, each asked on one backend, instead
of the same 40 asked twice (ROUNDS_SEARCH_VIEW_PAIRS sets the pairs per backend).
"""

from __future__ import annotations

import os
import random
from datetime import UTC, datetime

import orjson
import pytest

from services.fhir_api.search.extract import KINDS, index_tuples
from services.fhir_api.search.registry import params_for, supported_search_params
from services.fhir_api.search.values import from_us, to_us
from services.fhir_api.store.interface import Context, SearchRequest

PAIRS = int(os.environ.get("ROUNDS_SEARCH_VIEW_PAIRS", "20"))  # per backend
SEEDS = {"sqlite": 25, "postgresql": 26}
TYPES = (
    "Observation",
    "Condition",
    "Procedure",
    "MedicationRequest",
    "MedicationDispense",
    "MedicationAdministration",
    "Specimen",
    "MedicationStatement",
)
MOST = 1500  # resources of one type copied per pair (a patient's labs run to thousands)
SKIPPED = {"_lastUpdated", "patient", "subject"}  # scoped by `patient` already; new versions' meta
BEFORE_EVERYTHING = datetime(1800, 1, 1, tzinfo=UTC)


def _instant(us: int) -> str:
    return from_us(us).strftime("%Y-%m-%dT%H:%M:%SZ")


def _values(kind: str, row: tuple, now: int, rng: random.Random) -> list[str]:
    """Query values for one index row (param, key, *columns) of the parameter's kind."""
    cols = row[2:]
    if kind == "token":
        system, code = cols[0], cols[1]
        return [f"{system}|{code}" if system else code] if code else []
    if kind == "string":
        return [cols[1][:4]] if cols[1] else []
    if kind == "date":
        low = cols[0]
        if abs(low) >= 2**61:
            return [f"gt{_instant(now)}"]
        return [rng.choice(("eq", "ge", "le", "lt", "gt", "sa", "eb")) + _instant(low), f"gt{_instant(now)}"]
    if kind == "number":
        return [f"{cols[0]:g}"]
    if kind == "quantity":
        return [f"{cols[0]:g}|{cols[1] or ''}|{cols[2] or ''}", f"gt{cols[0]:g}"]
    if kind == "reference":
        return [f"{cols[0]}/{cols[1]}"] if cols[0] and cols[1] else ([cols[2]] if cols[2] else [])
    return [cols[0]] if cols[0] else []


def _rows(body: dict, name: str, kind: str) -> list[tuple]:
    return [row for row in index_tuples(body).get(kind, ()) if row[0] == name]


def _queries(rtype: str, views: list[dict], full: list[dict], now: int, rng: random.Random) -> list[list]:
    """[(param, value)] of every supported parameter of the type, values from views and the full record."""
    out = []
    for name, kind, _ in supported_search_params(rtype):
        if kind not in KINDS or name in SKIPPED:
            continue
        values: list[str] = []
        for source in (views, full):
            for body in rng.sample(source, min(4, len(source))):
                rows = _rows(body, name, kind)
                if rows:
                    values += _values(kind, rng.choice(rows), now, rng)
                    break
        if kind == "date":
            values += [f"gt{_instant(now)}", f"le{_instant(now)}"]
        for value in dict.fromkeys(values):
            out.append([(name, value)])
    return out


def _extra(rtype: str, views: list[dict], now: int) -> list[list]:
    """Chains through the encounter (whose status and end the view rewrites), _include and _has."""
    found = []
    if "encounter" in params_for(rtype):
        found += [
            [("encounter.status", "in-progress")],
            [("encounter.status", "finished")],
            [("encounter.date", f"gt{_instant(now)}")],
            [("_include", f"{rtype}:encounter")],
        ]
    for body in views[:1] if rtype != "Patient" else ():
        for row in index_tuples(body).get("token", ())[:1]:
            if row[3]:
                found.append([("_has", (rtype, row[0], row[3]))])
    return found


def _ask(store, ctx: Context, rtype: str, pid: str, query: list) -> tuple[set, int | None, set]:
    if query and query[0][0] == "_has":
        has_type, name, code = query[0][1]
        scope = "patient" if "patient" in params_for(has_type) else "subject"
        rtype, params = "Patient", [("_id", pid), (f"_has:{has_type}:{scope}:{name}", code)]
    else:
        params = [("_id", pid) if rtype == "Patient" else ("patient", pid), *query]
    result = store.search(ctx, SearchRequest(rtype, params, count=5000, total="accurate", strict=False))
    return {m.id for m in result.matches}, result.total, {(i.resource_type, i.id) for i in result.includes}


def _copy(store, ctx: Context, bodies: list[dict]) -> None:
    with store.transaction(ctx) as tx:
        for body in bodies:
            tx.update(ctx, body["resourceType"], body["id"], body)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_every_search_parameter_sees_only_the_view(demo_store) -> None:
    store, spans = demo_store
    rng = random.Random(SEEDS[store.engine.dialect.name])
    combinations = pairs = 0
    leaks: list[str] = []
    for _ in range(PAIRS):
        pid = rng.choice(sorted(spans))
        first, last = spans[pid]
        ctx = store.get_session(store.create_session(from_us(rng.randint(first, last))))
        now = to_us(ctx.now)
        mirror = store.get_session(store.create_session(BEFORE_EVERYTHING))
        chosen = ["Patient", "Encounter", *rng.sample(TYPES, 3)]
        served: dict[str, list[dict]] = {}
        for rtype in chosen:
            scope = [("_id", pid)] if rtype == "Patient" else [("patient", pid)]
            views = store.search(ctx, SearchRequest(rtype, scope, count=MOST + 1)).matches
            if len(views) > MOST:
                continue
            served[rtype] = [orjson.loads(v.raw) for v in views]
            _copy(store, mirror, served[rtype])
        pairs += 1
        for rtype, views in served.items():
            scope = [("_id", pid)] if rtype == "Patient" else [("patient", pid)]
            full = [
                orjson.loads(r.raw)
                for r in store.search(Context(), SearchRequest(rtype, scope, count=5000)).matches
            ]
            asked = [[], *_queries(rtype, views, full, now, rng), *_extra(rtype, views, now)]
            if rtype == "Patient":
                asked += [[("_revinclude", f"{t}:patient")] for t in served if t != "Patient"]
                asked += [
                    [("death-date", f"gt{_instant(now)}")],
                    [("deceased", "true")],
                    [("deceased", "false")],
                ]
            for query in asked:
                combinations += 1
                got, expected = _ask(store, ctx, rtype, pid, query), _ask(store, mirror, rtype, pid, query)
                if got != expected:
                    leaks.append(f"{rtype}?{query} at {ctx.now}: session {got} != views {expected}")
        store.drop_session(ctx.session_id)
        store.drop_session(mirror.session_id)
    print(
        f"\n{pairs} (patient, clock) pairs, {combinations} (patient, clock, parameter) combinations: "
        f"{len(leaks)} leaks"
    )
    assert combinations > 50 * pairs
    assert not leaks, leaks[:10]
