"""`rounds map --mimic DIR --out DIR [--validate] [--workers N] [--shard i/n]`."""

from __future__ import annotations

from pathlib import Path

import typer

from rounds.options import ShardSpec, parse_shard


def register(app: typer.Typer) -> None:
    @app.command("map")
    def map_cmd(
        mimic: Path = typer.Option(..., "--mimic", help="MIMIC-IV folder (hosp/, icu/, ed/, note/)."),
        out: Path = typer.Option(
            ..., "--out", help="Output folder for Mimic<Profile>.ndjson and summary.json."
        ),
        validate: bool = typer.Option(
            False, "--validate", help="Validate every resource (fhir.resources R4B)."
        ),
        validate_stride: int = typer.Option(
            0,
            "--validate-stride",
            help="Validate one resource in N (a deterministic sample; implies --validate).",
        ),
        workers: int = typer.Option(1, "--workers", min=1, help="Worker processes (jobs run in parallel)."),
        shard: ShardSpec = None,
    ) -> None:
        """Map MIMIC-IV (real, demo or synthetic) to FHIR R4 NDJSON compatible with MIMIC-IV on FHIR."""
        from fhir_mapper.pipeline import run_map

        if not mimic.is_dir():
            typer.echo(f"error: {mimic} is not a directory", err=True)
            raise typer.Exit(2)
        stride = validate_stride or (1 if validate else 0)
        summary, code = run_map(mimic, out, workers=workers, validate_stride=stride, shard=parse_shard(shard))
        typer.echo(
            f"{summary['total_resources']} resources in {len(summary['files'])} files, "
            f"{summary['rejected_rows']} rejected rows, {len(summary['skipped_tables'])} skipped tables, "
            f"{summary['validation']['failures']} validation failures, {summary['elapsed_seconds']} s "
            f"-> {out / 'summary.json'}"
        )
        raise typer.Exit(code)
