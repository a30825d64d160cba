"""`rounds scenarios import fhir-agentbench CSV --out FILE.jsonl`: the peer's question file as sessions."""

from __future__ import annotations

from pathlib import Path

import typer

from rounds.options import DatabaseUrl

import_app = typer.Typer(help="Import a published benchmark's questions as sessions.", no_args_is_help=True)


def counts_lines(summary: dict) -> list[str]:
    """The import's counts as the command prints them: sessions by table, skips by reason, gold by type."""
    gold = summary["gold_ids"]
    return [
        f"{summary['sessions']} sessions of {summary['questions']} questions",
        "  by table: " + (", ".join(f"{k}={v}" for k, v in summary["by_table"].items()) or "-"),
        "  skipped: " + ", ".join(f"{k}={v}" for k, v in summary["skipped"].items()),
        "  gold ids kept: " + (", ".join(f"{k}={v}" for k, v in gold["kept"].items()) or "-"),
        "  gold ids dropped (absent from the record): "
        + (", ".join(f"{k}={v}" for k, v in gold["dropped_absent_from_record"].items()) or "none"),
    ]


@import_app.command("fhir-agentbench")
def fhir_agentbench_cmd(
    ctx: typer.Context,
    csv_file: Path = typer.Argument(..., exists=True, dir_okay=False, metavar="CSV",
                                    help="FHIR-AgentBench's questions_answers_sql_fhir.csv (or a split)."),
    out: Path = typer.Option(..., "--out", help="FILE.jsonl (FILE.summary.json is written beside it)."),
    fhir_base: str | None = typer.Option(None, "--fhir-base", help="Any FHIR R4 server base URL."),
    database_url: DatabaseUrl = None,
    timeout: float = typer.Option(120.0, "--timeout", min=1, help="Seconds per request to --fhir-base."),
) -> None:
    """One single-turn session per question; counts by reason and by resource type; a bad row exits 2."""
    from services.simulator.scenarios import output
    from services.simulator.scenarios.fhir_agentbench.importer import import_questions
    from services.simulator.scenarios.fhir_agentbench.rows import BadRow, read_questions
    from services.simulator.scenarios.reader import RecordError
    from services.simulator.scenarios.source import on_record

    if fhir_base and database_url:
        raise typer.BadParameter("give --fhir-base or --database-url, not both")
    try:
        questions = read_questions(csv_file)
    except BadRow as exc:
        typer.echo(f"error: {csv_file}: {exc}; nothing imported", err=True)
        raise typer.Exit(2) from exc
    imported = on_record(ctx, fhir_base, database_url,
                         lambda source: import_questions(source, questions, timeout), (RecordError,),
                         "; nothing imported")
    output.write(out, imported.scenarios, imported.summary)
    for text in counts_lines(imported.summary):
        typer.echo(text)
    typer.echo(f"-> {out}")
