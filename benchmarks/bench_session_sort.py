"""The search every assistant sends to find a patient's latest result, in a session, for EVERY patient of a
loaded store: `Observation?patient=<id>&_sort=-date&_count=50`; prints each patient's time, the slowest ones
and the total.

    python benchmarks/bench_session_sort.py --database-url sqlite:///demo.sqlite [--now 2300-01-01]
                                            [--patients N] [--repeat 1]

Load the mapped demo first (`rounds map --mimic ../shared/data/mimic-iv-demo --out DIR` then
`rounds load --ndjson DIR`). The session's clock defaults to far after every demo date, so each search sees
the patient's every Observation (the heaviest case); `--now` picks another clock. `--patients N` runs only
the N patients with the most Observations. Run it with PYTHONPATH set to another checkout to time that code
on the same store. A query bounded by the store's timeout (`ROUNDS_QUERY_TIMEOUT_MS`) prints as `timeout`.
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime

import orjson
from sqlalchemy import func, select

from services.fhir_api.store import models as m
from services.fhir_api.store.interface import Context, SearchRequest
from tests.wiring import store_on


def patients_by_size(store, limit: int | None) -> list[tuple[str, int]]:
    """(Patient id, Observations referring to it), most first."""
    ref, r = m.reference, m.resource
    stmt = (
        select(r.c.res_id, func.count(ref.c.rid))
        .select_from(r)
        .outerjoin(ref, (ref.c.target_type == "Patient") & (ref.c.target_id == r.c.res_id))
        .where(r.c.res_type == "Patient", r.c.session == "")
        .group_by(r.c.res_id)
        .order_by(func.count(ref.c.rid).desc(), r.c.res_id)
    )
    with store.engine.connect() as conn:
        rows = conn.execute(stmt.limit(limit) if limit else stmt).all()
    return [(row[0], row[1]) for row in rows]


def _identifier(store, pid: str) -> str:
    """The patient's first identifier value (MIMIC-IV subject_id on the mapped demo), else its id."""
    resource = orjson.loads(store.read(Context(), "Patient", pid).raw)
    return next((i["value"] for i in resource.get("identifier", []) if "value" in i), pid)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--now", default="2300-01-01T00:00:00+00:00", help="the session's clock")
    parser.add_argument("--patients", type=int, help="only the N patients with the most references")
    parser.add_argument("--repeat", type=int, default=1, help="runs per patient (the fastest is kept)")
    args = parser.parse_args()
    store = store_on(args.database_url)
    now = datetime.fromisoformat(args.now)
    ctx = store.get_session(store.create_session(now if now.tzinfo else now.replace(tzinfo=UTC)))
    times: list[tuple[float, str, int, int]] = []
    names: dict[str, str] = {}
    began = time.perf_counter()
    for pid, refs in patients_by_size(store, args.patients):
        names[pid] = _identifier(store, pid)
        best, found = float("inf"), -1
        for _ in range(args.repeat):
            request = SearchRequest("Observation", [("patient", pid), ("_sort", "-date")], count=50)
            started = time.perf_counter()
            try:
                found = len(store.search(ctx, request).matches)
            except Exception as exc:  # noqa: BLE001 - a bounded query is a figure, not a crash
                found = -1
                print(f"  {pid}: {type(exc).__name__}: {str(exc)[:120]}")
            best = min(best, time.perf_counter() - started)
        times.append((best, pid, refs, found))
        print(f"{pid} ({names[pid]}) refs {refs:6,} matches {found:3} {best * 1000:10.1f} ms", flush=True)
    store.drop_session(ctx.session_id or "")
    times.sort(reverse=True)
    total = time.perf_counter() - began
    print(f"patients: {len(times)}, session clock {now.isoformat()}, wall {total:.1f} s")
    print(
        "slowest: "
        + "; ".join(f"{names[pid]} ({refs:,} refs) {t * 1000:,.1f} ms" for t, pid, refs, _ in times[:5])
    )
    ordered = sorted(t for t, *_ in times)
    print(f"median {ordered[len(ordered) // 2] * 1000:,.1f} ms, max {ordered[-1] * 1000:,.1f} ms")
    store.engine.dispose()


if __name__ == "__main__":
    main()
