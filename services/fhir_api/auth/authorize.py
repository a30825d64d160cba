"""`/auth/authorize`: the authorization endpoint of SMART App Launch v2 (authorization code + PKCE S256).

Order matters: the client and its redirect URI are checked first — the client must be registered and the
redirect URI one of its registered URIs, exactly — and until both hold every error is a page here, never a
redirect. Then the user must be logged in (login.py; with ROUNDS_AUTH_AUTO_APPROVE and
ROUNDS_AUTH_AUTO_APPROVE_USER, the operator-configured user stands in). Then the request: `code`, `state`,
PKCE S256, and the audience — the FHIR base the client is registered for, else this server's `/fhir`, or for
an EHR launch (`launch` from `rounds launch`) the launch's session. Errors from there on are redirected to the
app (RFC 6749 §4.1.2.1). GET answers the consent page (skipped with ROUNDS_AUTH_AUTO_APPROVE when the context
is complete); POST is its answer and must carry the login's CSRF value.

What is granted is bound to the user (grants.py): their scope ceiling, and the patient of a launch only one
they may see — the launch's, or one picked on the consent page among theirs. A standalone launch asking
`launch/encounter` then picks one of that patient's stays on a second page (encounters.py), among those the
audience session shows; the picked id is checked again, since the form is the browser's to change.
"""

from __future__ import annotations

import html
from dataclasses import replace
from urllib.parse import parse_qsl, urlencode, urlsplit

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.concurrency import run_in_threadpool

from services.fhir_api.auth.clients import Client, find_client
from services.fhir_api.auth.encounters import EncounterChoice, is_patient_encounter, patient_encounters, view
from services.fhir_api.auth.grants import grant_scopes
from services.fhir_api.auth.launch import Authorization, LaunchContext, issue_code, open_launch
from services.fhir_api.auth.login import (
    AUTHORIZE_PARAMS,
    NO_STORE,
    configured_user,
    current_user,
    engine,
    login_redirect,
)
from services.fhir_api.auth.scopes import ScopeError
from services.fhir_api.auth.tokens import InvalidToken
from services.fhir_api.auth.users import User
from services.fhir_api.http.links import external_root
from services.fhir_api.store.interface import StoreError

router = APIRouter(tags=["auth"])


class Refused(Exception):
    """Redirected back to the app as an OAuth error."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error, self.description = error, description


class Untrusted(Exception):
    """Answered on this page (400): the redirect URI or the client cannot be trusted with a redirect."""


def _redirect(uri: str, params: dict[str, str]) -> RedirectResponse:
    sep = "&" if urlsplit(uri).query else "?"
    return RedirectResponse(f"{uri}{sep}{urlencode(params)}", status_code=302,
                            headers={"Cache-Control": "no-store"})


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc


async def _client(request: Request, params: dict[str, str]) -> Client:
    """The registered client whose registered redirect URI the request names, exactly; Untrusted otherwise."""
    client_id, redirect_uri = params.get("client_id", ""), params.get("redirect_uri", "")
    if not client_id or not redirect_uri:
        raise Untrusted("client_id and redirect_uri are required.")
    client = await run_in_threadpool(find_client, engine(request), client_id)
    if client is None:
        raise Untrusted(f"unknown client {client_id[:80]!r}: the operator registers apps "
                        "(rounds token client --redirect-uri ...).")
    if redirect_uri not in client.redirect_uris:
        raise Untrusted("redirect_uri is not one this client registered (exact match).")
    return client


async def _context(request: Request, params: dict[str, str], client: Client) -> LaunchContext:
    """The launch context the request may have: the EHR launch's, or the audience's session."""
    auth = request.app.state.auth
    root = external_root(request, request.app.state.settings)
    aud = params.get("aud", "").rstrip("/")
    if params.get("launch"):
        try:
            context = open_launch(auth.key, params["launch"])
        except InvalidToken as exc:
            raise Refused("invalid_request", f"invalid launch: {exc}") from exc
        if context.app and _origin(context.app) != _origin(params["redirect_uri"]):
            raise Untrusted("redirect_uri is not on the origin of the app this launch was issued for")
        expected = f"{root}/sessions/{context.session}/fhir" if context.session else f"{root}/fhir"
    else:
        expected = client.fhir_base or f"{root}/fhir"
        context = LaunchContext()
        if expected.startswith(f"{root}/sessions/") and expected.endswith("/fhir"):
            context = LaunchContext(session=expected[len(f"{root}/sessions/"):-len("/fhir")])
    if aud != expected:
        raise Refused("invalid_request", f"aud must be {expected} (the FHIR base of this launch or client), "
                                         f"not {aud[:200]!r}")
    if context.session is not None:
        session = await auth.store.get_session_async(context.session)
        if session is None or session.ended:
            raise Refused("invalid_request", f"aud names no open session of this server: {aud}")
    return context


def _check(params: dict[str, str]) -> None:
    if params.get("response_type") != "code":
        raise Refused("unsupported_response_type", "only response_type=code is supported")
    if not params.get("state"):
        raise Refused("invalid_request", "state is required")
    if params.get("code_challenge_method") != "S256" or not params.get("code_challenge"):
        raise Refused("invalid_request", "PKCE is required: code_challenge with code_challenge_method=S256")


async def _known(request: Request, context: LaunchContext, resource_type: str, id: str) -> bool:
    store = request.app.state.store
    try:
        await store.read_async(await view(store, context.session), resource_type, id)
    except StoreError:
        return False
    return True


async def _patient(request: Request, context: LaunchContext, user: User, wanted: list[str],
                   choice: dict[str, str] | None) -> LaunchContext | None:
    """The context with its patient, checked against what the user may see; None: ask on the consent page.
    A user who does not see every patient always launches with one of theirs in context."""
    if context.patient is not None:
        if not user.sees(context.patient):
            raise Refused("access_denied", f"{user.name} may not see Patient/{context.patient}")
        return context
    if "launch/patient" not in wanted and user.patients is None:
        return context
    picked = (choice or {}).get("patient", "").removeprefix("Patient/")
    if not picked:
        return None
    if not user.sees(picked):
        raise Refused("access_denied", f"{user.name} may not see Patient/{picked}")
    if not await _known(request, context, "Patient", picked):
        raise Refused("invalid_request", f"no Patient/{picked} in this record")
    return LaunchContext(context.session, picked, context.encounter, context.app)


async def _encounter(request: Request, params: dict[str, str], context: LaunchContext,
                     choice: dict[str, str] | None) -> LaunchContext | list[EncounterChoice]:
    """A standalone launch asking `launch/encounter`: the context with the encounter picked among the
    patient's (as the launch's session shows them), or the options to ask for on the consent page. An EHR
    launch's context is the EHR's; a patient without a visible stay launches without one."""
    wanted = params.get("scope", "").split()
    if params.get("launch") or "launch/encounter" not in wanted or context.encounter or not context.patient:
        return context
    store = request.app.state.store
    ctx = await view(store, context.session)
    picked = (choice or {}).get("encounter", "").removeprefix("Encounter/")
    if not picked:
        options = await patient_encounters(store, ctx, context.patient)
        return options or context
    if not await is_patient_encounter(store, ctx, context.patient, picked):
        raise Refused("invalid_request", f"Encounter/{picked} is not a stay of Patient/{context.patient} "
                                         "this launch shows")
    return replace(context, encounter=picked)


async def _decide(request: Request, params: dict[str, str], choice: dict[str, str] | None) -> Response:
    """The answer to an authorization request; `choice` is the consent form's (None: not yet asked)."""
    if request.app.state.auth is None:
        return _page(400, "Access control is off on this server (ROUNDS_AUTH): no authorization is needed.")
    settings = request.app.state.settings
    try:
        client = await _client(request, params)
        login = await current_user(request)
        if login is None:
            stand_in = await configured_user(request) if settings.auth_auto_approve else None
            if stand_in is None:
                return login_redirect(request, params)
            login = (stand_in, "")  # the operator's unattended approvals: no login, so no CSRF to check
        user, csrf = login
        if choice is not None and csrf and choice.get("csrf") != csrf:
            return _page(403, "The consent form must come from this server's page (CSRF check failed): "
                              "log in and approve again.")
        redirect_uri, state = params["redirect_uri"], params.get("state", "")
        try:
            _check(params)
            context = await _context(request, params, client)
            if choice is not None and choice.get("decision") != "approve":
                raise Refused("access_denied", "the authorization was not approved")
            wanted = params.get("scope", "").split()
            picked = await _patient(request, context, user, wanted, choice)
            if picked is None:
                return _consent(params, context, user, csrf, ask_patient=True)
            stay = await _encounter(request, params, picked, choice)
            if isinstance(stay, list):
                return _consent(params, picked, user, csrf, ask_patient=False, encounters=stay)
            picked = stay
            if choice is None and not settings.auth_auto_approve:
                return _consent(params, picked, user, csrf, ask_patient=False)
            try:
                scope = grant_scopes(params.get("scope", ""), picked.patient, user, client)
            except ScopeError as exc:
                raise Refused("invalid_scope", str(exc)) from exc
        except Refused as exc:
            return _redirect(redirect_uri, {"error": exc.error, "error_description": exc.description,
                                            "state": state})
    except Untrusted as exc:
        return _page(400, str(exc))
    grant = Authorization(picked, scope, client.client_id, redirect_uri, params["code_challenge"],
                          user=user.name, nonce=params.get("nonce", ""))
    return _redirect(redirect_uri, {"code": issue_code(request.app.state.auth.key, grant), "state": state})


@router.get("/auth/authorize", summary="SMART App Launch authorization endpoint", include_in_schema=False)
async def authorize(request: Request) -> Response:
    params = {k: v for k, v in request.query_params.items() if k in AUTHORIZE_PARAMS}
    return await _decide(request, params, None)


@router.post("/auth/authorize", summary="the consent form's answer", include_in_schema=False)
async def consent(request: Request) -> Response:
    try:
        form = dict(parse_qsl((await request.body()).decode(), keep_blank_values=True))
    except (UnicodeDecodeError, ValueError):
        return _page(400, "the consent form must be application/x-www-form-urlencoded")
    params = {k: v for k, v in form.items() if k in AUTHORIZE_PARAMS}
    return await _decide(request, params, form)


def _page(status: int, message: str) -> HTMLResponse:
    return HTMLResponse(f"<!doctype html><title>Rounds authorization</title><p>{html.escape(message)}</p>",
                        status, headers=NO_STORE)


def _consent(params: dict[str, str], context: LaunchContext, user: User, csrf: str, ask_patient: bool,
             encounters: list[EncounterChoice] | None = None) -> HTMLResponse:
    """The consent page; it asks for the patient (`ask_patient`), or with `encounters` for one of the
    patient's stays (the patient then travels as a hidden field)."""
    fields = {**params, "csrf": csrf}
    if encounters:
        fields["patient"] = context.patient or ""
    hidden = "".join(f'<input type="hidden" name="{k}" value="{html.escape(v)}">' for k, v in fields.items())
    where = f"session {context.session}" if context.session else "the shared record"
    if encounters:
        options = "".join(f'<option value="{html.escape(e.id)}">{html.escape(e.label or e.id)}</option>'
                          for e in encounters)
        patient = (f"<p>Patient: {html.escape(context.patient or '')}</p>"
                   f'<label>Encounter <select name="encounter" required>{options}</select></label>')
    elif not ask_patient:
        patient = f"<p>Patient: {html.escape(context.patient or '(none)')}</p>"
    elif user.patients is None:
        patient = '<label>Patient id <input name="patient" required></label>'
    else:
        options = "".join(f'<option value="{html.escape(p)}">{html.escape(p)}</option>'
                          for p in sorted(user.patients))
        patient = f'<label>Patient <select name="patient" required>{options}</select></label>'
    client = html.escape(params.get("client_id", ""))
    body = (f"<!doctype html><title>Authorize {client}</title>"
            f"<h1>{client} asks for access to {html.escape(where)}</h1>"
            f"<p>Approving as {html.escape(user.name)}. Scopes: "
            f"<code>{html.escape(params.get('scope', ''))}</code></p>"
            f'<form method="post" action="/auth/authorize">{hidden}{patient}'
            '<button name="decision" value="approve">Approve</button>'
            '<button name="decision" value="deny">Deny</button></form>')
    return HTMLResponse(body, headers=NO_STORE)
