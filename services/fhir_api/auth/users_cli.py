"""`rounds users add NAME`: the operator's user store for SMART App Launch approvals (users.py).

The password is read from a prompt (or `--password-stdin`), never from the command line, where it would stay
in the shell history and the process list.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from rounds.options import DatabaseUrl

users_app = typer.Typer(help="Users who may log in at /auth/login and approve an app's launch.",
                        no_args_is_help=True)


@users_app.command("add")
def add(
    command: typer.Context,
    name: Annotated[str, typer.Argument(help="the user's login name")],
    patient: Annotated[list[str] | None, typer.Option(
        help="a patient the user may see (Patient/<id> or <id>; repeat the option)")] = None,
    all_patients: Annotated[bool, typer.Option(help="the user may see every patient")] = False,
    scope: Annotated[str, typer.Option(help="the most the user's approval may grant")] = "user/*.rs",
    password_stdin: Annotated[bool, typer.Option(help="read the password from stdin")] = False,
    database_url: DatabaseUrl = None,
) -> None:
    """Add (or replace) a user: a scrypt hash of their password, their patients and scope ceiling."""
    from rounds.wiring import wiring
    from services.fhir_api.auth.users import add_user

    if all_patients == bool(patient):
        raise typer.BadParameter("give --patient (one or more) or --all-patients", param_hint="--patient")
    password = sys.stdin.readline().rstrip("\n") if password_stdin else \
        typer.prompt("password", hide_input=True, confirmation_prompt=True)
    engine = wiring(command, database_url).upgrade().engine()
    try:
        user = add_user(engine, name, password, None if all_patients else list(patient or ()), scope)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    seen = "every patient" if user.patients is None else ", ".join(sorted(user.patients))
    typer.echo(f"user {user.name}: {seen}; at most {user.scope}")
