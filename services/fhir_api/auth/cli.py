"""`rounds token issue` (print a bearer token) and `rounds token client` (register a backend client).

Both sign / store with the same key and tables `rounds serve` uses on that database, so what they print works
against the server with no further set-up (the schema is upgraded first, as `rounds serve` does, by the
process's root, which also makes the engine: rounds/wiring.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rounds.options import DatabaseUrl

token_app = typer.Typer(help="Bearer tokens for the FHIR API (access control: ROUNDS_AUTH=on).",
                        no_args_is_help=True)

def _engine(command: typer.Context, database_url: str | None):
    """The settings, and the engine of the database that keeps the key (None when ROUNDS_AUTH_KEY is set)."""
    from rounds.wiring import wiring

    wired = wiring(command, database_url)
    if wired.settings.auth_key is None:
        return wired.settings, wired.upgrade().engine()
    return wired.settings, None


@token_app.command("issue")
def issue_token(
    command: typer.Context,
    scope: Annotated[str, typer.Option(help='SMART scopes, space-separated, e.g. "system/*.cruds"')],
    session: Annotated[str | None, typer.Option(help="valid only on this session's FHIR base")] = None,
    patient: Annotated[str | None, typer.Option(help="the patient `patient/` scopes are confined to")] = None,
    expires_in: Annotated[int, typer.Option(min=1, help="lifetime in seconds")] = 3600,
    subject: Annotated[str, typer.Option(help="the token's sub claim")] = "cli",
    database_url: DatabaseUrl = None,
) -> None:
    """Print a signed token (HS256 JWT) carrying `scope`."""
    from services.fhir_api.auth.scopes import ScopeError, parse_scopes
    from services.fhir_api.auth.tokens import issue, signing_key

    try:
        scopes = parse_scopes(scope)
    except ScopeError as exc:
        raise typer.BadParameter(str(exc), param_hint="--scope") from exc
    if not scopes:
        raise typer.BadParameter("no resource scope given", param_hint="--scope")
    settings, engine = _engine(command, database_url)
    key = signing_key(engine, settings.auth_key)
    typer.echo(issue(key, scopes, expires_in=expires_in, subject=subject, session=session,
                     patient=patient.removeprefix("Patient/") if patient else None))


@token_app.command("client")
def add_client(
    command: typer.Context,
    client_id: Annotated[str, typer.Option("--id", help="the client id")],
    scope: Annotated[str, typer.Option(help="the scopes the client may be granted")],
    secret: Annotated[str | None, typer.Option(help="its shared secret (default: generated)")] = None,
    redirect_uri: Annotated[list[str] | None, typer.Option(
        help="an app's redirect URI, matched exactly (repeat the option)")] = None,
    fhir_base: Annotated[str | None, typer.Option(
        help="the FHIR base the app is registered for (default: the server's /fhir)")] = None,
    public: Annotated[bool, typer.Option(help="a public app: no secret, PKCE is its proof")] = False,
    jwks: Annotated[str | None, typer.Option(
        help="SMART Backend Services: a JWKS file of the client's public keys, or the https URL of one "
             "(private_key_jwt instead of a secret)")] = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Register a client: a backend service for POST /auth/token (client_credentials), or with
    --redirect-uri an app of SMART App Launch (confidential unless --public); prints its secret."""
    from rounds.wiring import wiring
    from services.fhir_api.auth.clients import register_client
    from services.fhir_api.auth.scopes import ScopeError

    engine = wiring(command, database_url).upgrade().engine()
    if jwks is not None and not jwks.startswith(("https://", "http://")):
        jwks = Path(jwks).read_text(encoding="utf-8")
    try:
        typer.echo(register_client(engine, client_id, scope, secret,
                                   redirect_uris=tuple(redirect_uri or ()), fhir_base=fhir_base,
                                   public=public, jwks=jwks))
    except ScopeError as exc:
        raise typer.BadParameter(str(exc), param_hint="--scope") from exc
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc


def register(app: typer.Typer) -> None:
    from services.fhir_api.auth.launch_cli import launch
    from services.fhir_api.auth.users_cli import users_app

    app.add_typer(token_app, name="token")
    app.add_typer(users_app, name="users")
    app.command("launch")(launch)
