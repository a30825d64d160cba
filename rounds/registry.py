"""The composition root's command table: which module contributes each `rounds` command.

It names modules of every floor (mapper, FHIR API, event log, simulator, consumers), so it lives here, on the
top floor, and nothing below imports this module: `rounds.cli` builds the command line from `COMMANDS`. This
module imports nothing of the project at import time, so `rounds --help` reads the command table without
loading a command. (Which modules declare tables is rounds/migrate.py's `MODEL_MODULES`.)

A new command module: add its commands to `COMMANDS` (tests/foundation/test_registrations.py fails until the
list is complete, and tests/foundation/test_cli_registry.py until each summary is the command's own help).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CommandEntry:
    """One top-level `rounds` command: its name, the module whose `register(app)` adds it, and the line
    `rounds --help` shows for it (the first paragraph of the command's own help)."""

    name: str
    module: str
    summary: str


# The order of `rounds --help`. A module adding several commands is listed once per command.
COMMANDS: tuple[CommandEntry, ...] = (
    CommandEntry("demo", "rounds.demo_view",
        "The whole loop: synthesize → map → load → scenarios → baseline/oracle/weak sessions → score "
        "→ report.html."),
    CommandEntry("synth", "fhir_mapper.synth.cli",
        "Generate MIMIC-IV-shaped tables (hosp, icu incl. chartevents, ed, note) with faker."),
    CommandEntry("map", "fhir_mapper.cli",
        "Map MIMIC-IV (real, demo or synthetic) to FHIR R4 NDJSON compatible with MIMIC-IV on FHIR."),
    CommandEntry("serve", "services.fhir_api.serve",
        "Serve the FHIR R4 API (/fhir, /sessions, /docs)."),
    CommandEntry("load", "services.fhir_api.load_cli",
        "Stream a folder of FHIR NDJSON into the store: idempotent, resumable, COPY on PostgreSQL."),
    CommandEntry("reindex", "services.fhir_api.reindex",
        "Recompute the search-index rows of stored resources (after the search parameters changed)."),
    CommandEntry("launch", "services.fhir_api.auth.cli",
        "Print the EHR-launch URL of APP into SESSION (open it in a browser, or hand it to the app)."),
    CommandEntry("feed", "services.fhir_api.subscriptions.cli",
        "Advance SESSION's clock from --from to --to so what became known appears, in order, and is "
        "announced to the session's Subscriptions (through rounds.fhir-changes)."),
    CommandEntry("hl7", "services.fhir_api.hl7.cli",
        "HL7 v2 over MLLP: a connector's ORU/ADT into a session."),
    CommandEntry("report", "services.consumers.report.cli",
        "Summary table on the terminal; --html/--json write the page and the document."),
    CommandEntry("run", "rounds.run_command",
        "Run sessions between the physician and patient agents and an assistant; every message an "
        "event."),
    CommandEntry("replay", "rounds.run_command",
        "Replay a run's sessions (same scenarios, clocks, trials, languages) against another "
        "assistant."),
    CommandEntry("score", "services.consumers.scoring.cli",
        "Re-score a run from the log with a fresh or named consumer group; prints the summary as JSON."),
    CommandEntry("db", "rounds.db_cli",
        "Database schema management (alembic)."),
    CommandEntry("events", "events.cli",
        "The event log: topics, export and import."),
    CommandEntry("token", "services.fhir_api.auth.cli",
        "Bearer tokens for the FHIR API (access control: ROUNDS_AUTH=on)."),
    CommandEntry("users", "services.fhir_api.auth.cli",
        "Users who may log in at /auth/login and approve an app's launch."),
    CommandEntry("subscriptions", "services.fhir_api.subscriptions.cli",
        "FHIR Subscriptions fed by rounds.fhir-changes."),
    CommandEntry("consume", "services.consumers.scoring.cli",
        "Run a consumer service (a consumer group on the event log)."),
    CommandEntry("scenarios", "services.simulator.scenarios.cli",
        "Record-grounded benchmark sessions built from a FHIR record."),
)

# Modules exposing `register(app: typer.Typer) -> None`, each once, in the order of their first command.
COMMAND_MODULES: list[str] = list(dict.fromkeys(entry.module for entry in COMMANDS))
