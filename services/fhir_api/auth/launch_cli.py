"""`rounds launch --session ID --app URL`: an EHR launch of a SMART app into a session (SMART App Launch v2).

Prints the URL the EHR opens: the app's launch URL with `iss` (the session's FHIR base) and `launch` (a
signed launch context: the session, the patient and the encounter, and the app it was issued for, so the
authorization endpoint holds the redirect URI to that app's origin). The patient is `--patient`, or the
subject of `--encounter`; both are checked against the session's view of the record.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode, urlsplit

import orjson
import typer

from rounds.options import DatabaseUrl, ServerRoot


def _fail(message: str) -> None:
    typer.echo(message, err=True)
    raise typer.Exit(2)


def launch(
    command: typer.Context,
    session: Annotated[str | None, typer.Option(help="the session (default: the shared record)")] = None,
    app_url: Annotated[str, typer.Option("--app", help="the app's launch URL")] = "",
    patient: Annotated[str | None, typer.Option(help="the patient in context (Patient/<id> or <id>)")] = None,
    encounter: Annotated[str | None, typer.Option(help="the encounter in context (its subject is the patient "
                                                       "unless --patient says otherwise)")] = None,
    base_url: ServerRoot = None,
    expires_in: Annotated[int, typer.Option(min=1, help="how long the launch may be used (s)")] = 3600,
    database_url: DatabaseUrl = None,
) -> None:
    """Print the EHR-launch URL of APP into SESSION (open it in a browser, or hand it to the app)."""
    from rounds.wiring import wiring
    from services.fhir_api.auth import deployment_key
    from services.fhir_api.auth.launch import LaunchContext, issue_launch
    from services.fhir_api.store import open_store
    from services.fhir_api.store.interface import Context, StoreError

    parts = urlsplit(app_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        _fail("--app must be an absolute http(s) URL")
    wired = wiring(command, database_url).upgrade()
    settings, engine = wired.settings, wired.engine()
    store = open_store(engine)
    ctx = Context()
    if session is not None:
        found = store.get_session(session)
        if found is None:
            _fail(f"no session {session}")
        ctx = found
    patient = patient.removeprefix("Patient/") if patient else None
    encounter = encounter.removeprefix("Encounter/") if encounter else None
    try:
        if encounter is not None:
            doc = orjson.loads(store.read(ctx, "Encounter", encounter).raw)
            subject = (doc.get("subject") or {}).get("reference", "")
            patient = patient or subject.removeprefix("Patient/") or None
        if patient is None:
            _fail("--patient or --encounter is needed (the patient in context)")
        store.read(ctx, "Patient", patient)
    except StoreError as exc:
        _fail(f"not in the {'session' if session else 'record'}: {exc}")
    context = LaunchContext(session, patient, encounter, app_url)
    token = issue_launch(deployment_key(settings, engine), context, expires_in)
    root = (base_url or settings.base_url or "http://127.0.0.1:8080").rstrip("/")
    iss = f"{root}/sessions/{session}/fhir" if session else f"{root}/fhir"
    sep = "&" if parts.query else "?"
    typer.echo(f"{app_url}{sep}{urlencode({'iss': iss, 'launch': token})}")
