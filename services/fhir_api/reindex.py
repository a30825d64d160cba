"""`rounds reindex`: recompute the search-index rows of stored resources (HAPI's $reindex).

Index rows are derived from each resource's JSON by search/extract.py; when the search-parameter table or its
extraction changes (a new parameter, composite pair rows), resources written before keep their old rows until
re-indexed. This rewrites them from the current versions' stored JSON, shared record and session overlays
alike, in batches of rid order: each batch reads its rows (locked on PostgreSQL, so an API write to the same
resource waits instead of being overwritten by stale rows) and replaces their index rows in one transaction.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import typer
from sqlalchemy import Engine, not_, select

from rounds.options import DatabaseUrl
from services.fhir_api import json_numbers
from services.fhir_api.search.registry import resource_types
from services.fhir_api.store import models as m
from services.fhir_api.store.indexing import index_resources, unindex
from services.fhir_api.store.timing import settle_times


@dataclass
class ReindexReport:
    resources: int
    seconds: float


def reindex(engine: Engine, types: Sequence[str] = (), *, batch: int = 2000) -> ReindexReport:
    """Re-extract the index rows of every current (not deleted) resource of `types` (all types if empty)."""
    unknown = sorted(set(types) - set(resource_types()))
    if unknown:
        raise ValueError(f"unknown resource type(s): {', '.join(unknown)}")
    r, v = m.resource, m.version
    started, done, after = time.perf_counter(), 0, 0
    while True:
        stmt = (
            select(r.c.rid, v.c.raw, r.c.session)
            .join(v, v.c.seq == r.c.seq)
            .where(r.c.rid > after, not_(r.c.deleted))
            .order_by(r.c.rid)
            .limit(batch)
        )
        if types:
            stmt = stmt.where(r.c.res_type.in_(list(types)))
        if engine.dialect.name == "postgresql":
            stmt = stmt.with_for_update(of=r)
        with engine.begin() as conn:
            rows = conn.execute(stmt).all()
            if not rows:
                break
            unindex(conn, [row.rid for row in rows])
            for shared in (True, False):  # shared resources get their as-of rows (store/views.py)
                mine = [(x.rid, json_numbers.loads(x.raw)) for x in rows
                        if (x.session == m.SHARED_RECORD) == shared]
                index_resources(conn, mine, timed=shared)
            settle_times(conn, [row.rid for row in rows if row.session == m.SHARED_RECORD])
        done, after = done + len(rows), rows[-1][0]
    return ReindexReport(done, time.perf_counter() - started)


def register(app: typer.Typer) -> None:
    @app.command("reindex")
    def reindex_cmd(
        ctx: typer.Context,
        types: list[str] = typer.Option([], "--type", help="a type to re-index (repeatable; default: all)"),
        database_url: DatabaseUrl = None,
    ) -> None:
        """Recompute the search-index rows of stored resources (after the search parameters changed)."""
        from rounds.wiring import wiring

        try:
            report = reindex(wiring(ctx, database_url).upgrade().engine(), types)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--type") from None
        typer.echo(f"re-indexed {report.resources:,} resources in {report.seconds:.1f}s")
