"""Completeness of Patient/$everything on a loaded store: walk every patient's pages (keyset cursor, the first
page's snapshot) and count the references in the returned resources that do not resolve within the walk.

    python benchmarks/check_everything_refs.py --database-url sqlite:///demo.sqlite [--patients N]

Prints per patient the resources returned, the includes and the pages, then the unresolved references by
(resource type, element path, target type) -- none expected. On the mapped MIMIC-IV demo (2026-12-01, all 100
patients, pages of 500): every reference resolved (MedicationRequest -> mix -> ingredient Medications,
Encounter -> Location -> Organization, ...).
"""

from __future__ import annotations

import argparse
from collections import Counter

import orjson
from sqlalchemy import select

from services.fhir_api.store import cursor
from services.fhir_api.store import models as m
from services.fhir_api.store.interface import Context, SearchResult
from tests.wiring import store_on


def references(node, path: str, out: list[tuple[str, str]]) -> None:
    """(element path, reference) of every Reference below `node`."""
    if isinstance(node, dict):
        if isinstance(node.get("reference"), str):
            out.append((path, node["reference"]))
        for key, value in node.items():
            references(value, f"{path}.{key}", out)
    elif isinstance(node, list):
        for value in node:
            references(value, path, out)


def walk(store, pid: str, count: int) -> list[SearchResult]:
    pages = [store.everything(Context(), pid, count=count)]
    while pages[-1].has_next:
        at = cursor.decode("after", pages[-1].last_cursor)
        pages.append(store.everything(Context(), pid, count=count, cursor=at, snapshot=pages[-1].snapshot))
    return pages


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--patients", type=int)
    parser.add_argument("--count", type=int, default=500)
    args = parser.parse_args()
    store = store_on(args.database_url)
    r = m.resource
    with store.engine.connect() as conn:
        stmt = select(r.c.res_id).where(r.c.res_type == "Patient", r.c.session == "").order_by(r.c.res_id)
        patients = list(conn.execute(stmt.limit(args.patients) if args.patients else stmt).scalars())
    unresolved: Counter = Counter()
    for pid in patients:
        pages = walk(store, pid, args.count)
        returned = [res for page in pages for res in page.matches + page.includes]
        keys = {f"{res.resource_type}/{res.id}" for res in returned}
        for res in returned:
            found: list[tuple[str, str]] = []
            references(orjson.loads(res.raw), res.resource_type, found)
            for path, reference in found:
                if reference not in keys:
                    unresolved[(path, reference.split("/")[0])] += 1
        includes = sum(len(page.includes) for page in pages)
        print(f"{pid}: {len(keys):,} resources, {includes:,} includes, {len(pages)} pages", flush=True)
    print(f"patients: {len(patients)}; unresolved references: {sum(unresolved.values())}")
    for (path, target), n in unresolved.most_common(20):
        print(f"  {n:6,} {path} -> {target}")
    store.engine.dispose()


if __name__ == "__main__":
    main()
