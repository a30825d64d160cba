"""The single `rounds` command. Each component contributes its subcommands through `register(app)`."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="rounds",
    help="Rounds: MIMIC-IV -> FHIR R4 mapping, a FHIR R4 server with per-session sandboxes, "
    "and an event-sourced simulation/scoring backbone.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Modules exposing `register(app: typer.Typer) -> None`; order is the order in --help. A new command module:
# add one line here (tests/foundation/test_registrations.py fails until every such module is listed).
COMMAND_MODULES: list[str] = [
    "rounds.db_cli",
    "rounds.demo_view",
    "events.cli",
    "fhir_mapper.synth.cli",
    "fhir_mapper.cli",
    "services.fhir_api.serve",
    "services.fhir_api.load_cli",
    "services.fhir_api.reindex",
    "services.fhir_api.auth.cli",
    "services.fhir_api.subscriptions.cli",
    "services.consumers.report.cli",
    "services.simulator.orchestrator.cli",
    "services.consumers.scoring.cli",
    "services.simulator.scenarios.cli",
]


def _register_all() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(app)


_register_all()


def main() -> None:
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
