"""`rounds synth`: write a synthetic MIMIC-IV-shaped data set."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from rounds.options import ShardSpec, parse_shard


def register(app: typer.Typer) -> None:
    @app.command("synth")
    def synth_cmd(
        patients: int = typer.Option(..., "--patients", min=0, help="Number of patients to generate."),
        seed: int = typer.Option(0, "--seed", help="Random seed; the same seed gives byte-identical files."),
        out: Path = typer.Option(..., "--out", help="Output folder (hosp/, icu/, ed/, note/ are created)."),
        shard: ShardSpec = None,
    ) -> None:
        """Generate MIMIC-IV-shaped tables (hosp, icu incl. chartevents, ed, note) with faker."""
        from rich.progress import Progress

        from fhir_mapper.synth.generate import generate

        part = parse_shard(shard)
        try:
            out.mkdir(parents=True, exist_ok=True)
            probe = out / ".rounds-synth-write-test"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise typer.BadParameter(
                f"cannot write to {out}: {exc.strerror or exc}", param_hint="--out"
            ) from exc
        started = time.perf_counter()
        with Progress(transient=True, disable=not typer.get_text_stream("stderr").isatty()) as bar:
            task = bar.add_task("patients", total=patients)
            counts = generate(out, patients, seed, shard=part,
                              progress=lambda n: bar.update(task, completed=n))
        elapsed = time.perf_counter() - started
        for table, count in counts.items():
            typer.echo(f"{table:28s} {count:>12,}")
        typer.echo(f"{'total rows':28s} {sum(counts.values()):>12,}  ({patients} patients"
                   f"{f', shard {part}' if part.count > 1 else ''}, {elapsed:.1f} s)")
