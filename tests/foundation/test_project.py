"""Packaging, CLI and deployment descriptors are usable as shipped."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def test_rounds_help_lists_commands() -> None:
    res = subprocess.run(["rounds", "--help"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "Usage: rounds" in res.stdout
    assert "db" in res.stdout


def test_docker_compose_is_valid_and_wires_services() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"kafka", "postgres", "api"} <= set(services)
    kafka_env = services["kafka"]["environment"]
    assert kafka_env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert "KAFKA_CONTROLLER_QUORUM_VOTERS" in kafka_env and "KAFKA_LOG_DIRS" in kafka_env
    # Kafka's log dir is on a named volume, so data survives container restarts.
    volume_names = set(compose["volumes"])
    assert any(v.split(":")[0] in volume_names for v in services["kafka"]["volumes"])
    api_env = services["api"]["environment"]
    assert api_env["ROUNDS_DATABASE_URL"].startswith("postgresql+psycopg://")
    assert set(services["api"]["depends_on"]) >= {"kafka", "postgres"}


def test_ci_runs_the_readme_test_command() -> None:
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    assert "scripts/test.sh" in readme and "scripts/test.sh" in ci


def _cli_command(words: list[str]) -> object | None:
    """The click command `rounds <words...>` resolves to, or None (options end the lookup)."""
    import typer.main

    from rounds.cli import app

    command = typer.main.get_command(app)
    for word in words:
        if word.startswith("-") or not hasattr(command, "commands"):
            break
        command = command.commands.get(word)
        if command is None:
            return None
    return command


def test_every_compose_command_exists_in_the_cli() -> None:
    services = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    rounds_commands = {name: svc["command"] for name, svc in services.items() if svc.get("command")}
    assert rounds_commands, "no service runs a rounds command"
    for name, command in rounds_commands.items():
        assert command[0] == "rounds", f"{name}: {command}"
        resolved = _cli_command(command[1:])
        is_leaf = resolved is not None and not hasattr(resolved, "commands")
        assert is_leaf, f"service {name!r} runs {' '.join(command)!r}, which is not a rounds command"
    assert _cli_command(["no-such-command"]) is None  # the lookup itself can fail
    # `docker compose up` brings up the whole loop: broker, database, FHIR API, simulator, scorer
    assert {"kafka", "postgres", "api", "simulator", "scorer"} <= set(services)
    assert rounds_commands["simulator"][1] == "run" and rounds_commands["scorer"][1:] == ["consume", "scorer"]
