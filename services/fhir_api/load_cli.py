"""`rounds load`: bulk-load NDJSON into the FHIR store (the process's root migrates the schema first)."""

from __future__ import annotations

from pathlib import Path

import typer

from rounds.options import DatabaseUrl, ShardSpec, parse_shard


def register(app: typer.Typer) -> None:
    @app.command("load")
    def load(
        ctx: typer.Context,
        ndjson: Path = typer.Option(
            ..., "--ndjson", exists=True, file_okay=False, help="folder of *.ndjson[.gz]"
        ),
        database_url: DatabaseUrl = None,
        workers: int | None = typer.Option(None, help="loader processes (default: CPU count + 1)"),
        validate: bool = typer.Option(
            False, "--validate", help="validate every resource (skip invalid ones)"
        ),
        progress: bool = typer.Option(True, "--progress/--no-progress"),
        shard: ShardSpec = None,
    ) -> None:
        """Stream a folder of FHIR NDJSON into the store: idempotent, resumable, COPY on PostgreSQL."""
        from rounds.wiring import wiring
        from services.fhir_api.load import load_ndjson

        part = parse_shard(shard)
        wired = wiring(ctx, database_url).upgrade()
        report = load_ndjson(wired.engine(), ndjson, workers=workers, progress=progress, validate=validate,
                             shard=part, engine_factory=wired.engine_factory)
        typer.echo(
            f"loaded {report.resources:,} resources ({report.skipped:,} already present, "
            f"{report.errors:,} errors) from {len(report.files)} files in {report.seconds:.1f}s "
            f"= {report.resources_per_s:,.0f} resources/s"
        )
        for sample in report.error_samples:
            typer.echo(f"  error: {sample}", err=True)
