"""`rounds scenarios build|show|import`: build a scenario file from a FHIR record, print a session readably,
import a published benchmark's questions (fhir_agentbench/cli.py)."""

from __future__ import annotations

from pathlib import Path

import typer

from contracts.languages import LANGUAGES
from contracts.scenario import Scenario
from rounds.options import DatabaseUrl, ShardSpec, parse_shard
from services.simulator.scenarios.source import on_record

scenarios_app = typer.Typer(help="Record-grounded benchmark sessions built from a FHIR record.",
                            no_args_is_help=True)


@scenarios_app.command("build")
def build_cmd(
    ctx: typer.Context,
    out: Path = typer.Option(..., "--out", help="FILE.jsonl (FILE.summary.json is written beside it); with "
                             "--shard, the part file of the shard's charts."),
    fhir_base: str | None = typer.Option(None, "--fhir-base", help="Any FHIR R4 server base URL."),
    database_url: DatabaseUrl = None,
    seed: int = typer.Option(0, "--seed"),
    sessions: int = typer.Option(324, "--sessions", min=0, help="Multi-turn sessions in all."),
    per_category: int = typer.Option(
        30, "--per-category", min=0, help="MedAgentBench-style tasks per category."
    ),
    families: str | None = typer.Option(
        None, "--families", help="Comma-separated family names (default: all)."
    ),
    timeout: float = typer.Option(120.0, "--timeout", min=1, help="Seconds per request to --fhir-base."),
    shard: ShardSpec = None,
    charts: list[Path] | None = typer.Option(
        None, "--charts", exists=True, dir_okay=False, help="select from these chart parts (written by "
        "--shard builds) instead of reading the record; repeat for every shard"),
) -> None:
    """Build sessions from the record (read through the FHIR REST API) into FILE.jsonl + FILE.summary.json.
    With --shard i/n: read only that shard's charts into the part file --out; then build from every part
    with --charts (the same sessions, byte for byte, as one process)."""
    from services.simulator.scenarios import BuildError, build_async, build_from, output, write_part_async
    from services.simulator.scenarios.builder import definitions_of
    from services.simulator.scenarios.parts import read_parts
    from services.simulator.scenarios.proposals import Proposals

    part_of = parse_shard(shard)
    if charts and (shard or fhir_base or database_url):
        raise typer.BadParameter("--charts builds from parts: give no --shard, --fhir-base or --database-url")
    names = [f.strip() for f in families.split(",") if f.strip()] if families else None
    try:
        proposals = Proposals(definitions_of(names))  # checks the families before the (long) read
        if shard:
            part = on_record(ctx, fhir_base, database_url,
                             lambda source: write_part_async(source, part_of, out, timeout), (BuildError,))
            typer.echo(f"shard {part_of}: {part.read} charts, {len(part.skipped)} skipped -> {out}")
            return
        build = None
        if charts:
            build = build_from(read_parts(charts, proposals), seed, sessions, names, per_category)
    except BuildError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    if build is None:
        build = on_record(ctx, fhir_base, database_url,
                          lambda source: build_async(source, seed, sessions, names, per_category, timeout),
                          (BuildError,))
    output.write(out, build.scenarios, build.summary)
    s = build.summary
    typer.echo(f"{s['sessions']} sessions, {s['turns']} turns -> {out}")
    for key in ("by_family", "by_difficulty", "by_task_type"):
        typer.echo(f"  {key}: " + ", ".join(f"{k}={v}" for k, v in s[key].items()))
    typer.echo(
        f"  patients skipped: {len(s['patients']['skipped'])}; "
        f"memory facts dropped: {s['memory']['facts_dropped']}"
    )


def render(scenario: Scenario, language: str) -> str:
    """A session as a clinician would skim it: header, what the patient knows, then each turn's truth."""
    s = scenario
    lines = [
        f"{s.id}  [{s.family} · {s.difficulty}]",
        f"patient {s.patient}  encounter {s.encounter or '-'}  now {s.now.isoformat()}",
        "persona " + ", ".join(f"{k}={v}" for k, v in s.persona.model_dump().items()),
        "patient memory:",
    ]
    for fact in s.patient_memory:
        flag = " (critical)" if fact.critical else ""
        lines.append(f"  - {fact.id}{flag}: {getattr(fact.text, language)}  <- {', '.join(fact.sources[:2])}")
    for turn in s.turns:
        lines.append(f"turn {turn.index}  {turn.task_type}/{turn.tool_source}  subtype={turn.subtype or '-'}")
        lines.append(f"  explicit: {turn.text.get(language, 'explicit')}")
        lines.append(f"  implicit: {turn.text.get(language, 'implicit')}")
        for fact in turn.facts:
            label = getattr(fact.label, language) if fact.label else fact.code
            when = fact.time.isoformat() if fact.time else ""
            ref = fact.reference or f"{len(fact.references)} refs"
            lines.append(f"  fact {fact.kind}: {label} = {fact.value} {fact.unit or ''} {when}  <- {ref}")
        for write in turn.writes:
            checks = "; ".join(
                f"{c.path} {c.op} {c.value if c.value is not None else ''}".strip() for c in write.constraints
            )
            lines.append(f"  write {write.resource_type}: {checks}")
        if turn.forbid_writes:
            lines.append("  forbid_writes: nothing may be written")
        if turn.patient_facts:
            lines.append(f"  patient facts: {', '.join(turn.patient_facts)}")
        lines.append("  rubric: " + ", ".join(f"{r.kind}{'*' if r.safety else ''}" for r in turn.rubric))
        if turn.answer:
            lines.append(f"  answer: {getattr(turn.answer, language)}")
    return "\n".join(lines)


@scenarios_app.command("show")
def show_cmd(
    file: Path = typer.Argument(..., exists=True, dir_okay=False),
    session: str | None = typer.Option(None, "--session", help="Session id (default: the first)."),
    language: str = typer.Option("en", "--language", help="en or zh."),
) -> None:
    """Print a session of a scenario file readably."""
    from services.simulator.scenarios import output

    if language not in LANGUAGES:
        raise typer.BadParameter("--language is en or zh")
    for scenario in output.read(file):
        if session is None or scenario.id == session:
            typer.echo(render(scenario, language))
            return
    typer.echo(f"error: no session {session!r} in {file}", err=True)
    raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    from services.simulator.scenarios.fhir_agentbench.cli import import_app

    scenarios_app.add_typer(import_app, name="import")
    app.add_typer(scenarios_app, name="scenarios")
