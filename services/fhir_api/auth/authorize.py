"""`/auth/authorize`: the authorization endpoint of SMART App Launch v2 (authorization code + PKCE S256).

GET validates the request and answers the consent page (or, with ROUNDS_AUTH_AUTO_APPROVE and the context
complete, approves at once: tests and unattended demos); POST is the consent form's answer. Both end in a
redirect to the app's `redirect_uri` with `code` and `state`, or with an OAuth `error` (RFC 6749 §4.1.2.1).
A request whose client or redirect URI cannot be trusted is answered here, never redirected.

The audience is a FHIR base of this server: `<root>/fhir` (the shared record) or `<root>/sessions/<id>/fhir`
(a session's sandbox, which must exist). An EHR launch (`launch` from `rounds launch`) fixes the session,
patient and encounter, and the redirect URI must be on the launched app's origin; a standalone launch asking
`launch/patient` has the patient picked on the consent page. Rounds has no users: the consent is the
sandbox operator's, who sees what the app asks for.
"""

from __future__ import annotations

import html
from urllib.parse import parse_qsl, urlencode, urlsplit

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from services.fhir_api.auth.grants import grant_scopes
from services.fhir_api.auth.launch import Authorization, LaunchContext, issue_code, open_launch
from services.fhir_api.auth.scopes import ScopeError
from services.fhir_api.auth.tokens import InvalidToken
from services.fhir_api.http.links import external_root
from services.fhir_api.store.interface import Context, StoreError

router = APIRouter(tags=["auth"])
PARAMS = ("response_type", "client_id", "redirect_uri", "scope", "state", "aud", "code_challenge",
          "code_challenge_method", "launch")


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


async def _context(request: Request, params: dict[str, str]) -> LaunchContext:
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
    else:
        context = LaunchContext()
        if aud.startswith(f"{root}/sessions/") and aud.endswith("/fhir"):
            context = LaunchContext(session=aud[len(f"{root}/sessions/"):-len("/fhir")])
    expected = f"{root}/sessions/{context.session}/fhir" if context.session else f"{root}/fhir"
    if aud != expected:
        raise Refused("invalid_request", f"aud must be this server's FHIR base {expected}, not {aud!r}")
    if context.session is not None and await auth.store.get_session_async(context.session) is None:
        raise Refused("invalid_request", f"aud names no session of this server: {aud}")
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
    ctx = Context()
    if context.session is not None:
        ctx = await store.get_session_async(context.session) or ctx
    try:
        await store.read_async(ctx, resource_type, id)
    except StoreError:
        return False
    return True


async def _decide(request: Request, params: dict[str, str], choice: dict[str, str] | None) -> Response:
    """The answer to an authorization request; `choice` is the consent form's (None: not yet asked)."""
    client_id, redirect_uri = params.get("client_id", ""), params.get("redirect_uri", "")
    if request.app.state.auth is None:
        return _page(400, "Access control is off on this server (ROUNDS_AUTH): no authorization is needed.")
    if not client_id or _origin(redirect_uri)[0] not in ("http", "https") or not _origin(redirect_uri)[1]:
        return _page(400, "client_id and an absolute http(s) redirect_uri are required.")
    state = params.get("state", "")
    try:
        _check(params)
        context = await _context(request, params)
        wanted = params.get("scope", "").split()
        if choice is not None and choice.get("decision") != "approve":
            raise Refused("access_denied", "the authorization was not approved")
        if "launch/patient" in wanted and context.patient is None:
            picked = (choice or {}).get("patient", "").removeprefix("Patient/")
            if not picked:
                return _consent(params, context, ask_patient=True)
            if not await _known(request, context, "Patient", picked):
                raise Refused("invalid_request", f"no Patient/{picked} in this record")
            context = LaunchContext(context.session, picked, context.encounter, context.app)
        if choice is None and not request.app.state.settings.auth_auto_approve:
            return _consent(params, context, ask_patient=False)
        try:
            scope = grant_scopes(params.get("scope", ""), context.patient)
        except ScopeError as exc:
            raise Refused("invalid_scope", str(exc)) from exc
    except Untrusted as exc:
        return _page(400, str(exc))
    except Refused as exc:
        return _redirect(redirect_uri, {"error": exc.error, "error_description": exc.description,
                                        "state": state})
    grant = Authorization(context, scope, client_id, redirect_uri, params["code_challenge"])
    return _redirect(redirect_uri, {"code": issue_code(request.app.state.auth.key, grant), "state": state})


@router.get("/auth/authorize", summary="SMART App Launch authorization endpoint", include_in_schema=False)
async def authorize(request: Request) -> Response:
    params = {k: v for k, v in request.query_params.items() if k in PARAMS}
    return await _decide(request, params, None)


@router.post("/auth/authorize", summary="the consent form's answer", include_in_schema=False)
async def consent(request: Request) -> Response:
    try:
        form = dict(parse_qsl((await request.body()).decode(), keep_blank_values=True))
    except (UnicodeDecodeError, ValueError):
        return _page(400, "the consent form must be application/x-www-form-urlencoded")
    params = {k: v for k, v in form.items() if k in PARAMS}
    return await _decide(request, params, form)


def _page(status: int, message: str) -> HTMLResponse:
    return HTMLResponse(f"<!doctype html><title>Rounds authorization</title><p>{html.escape(message)}</p>",
                        status, headers={"Cache-Control": "no-store"})


def _consent(params: dict[str, str], context: LaunchContext, ask_patient: bool) -> HTMLResponse:
    hidden = "".join(f'<input type="hidden" name="{k}" value="{html.escape(v)}">' for k, v in params.items())
    where = f"session {context.session}" if context.session else "the shared record"
    patient = ('<label>Patient id <input name="patient" required></label>' if ask_patient
               else f"<p>Patient: {html.escape(context.patient or '(none)')}</p>")
    body = (f"<!doctype html><title>Authorize {html.escape(params.get('client_id', ''))}</title>"
            f"<h1>{html.escape(params.get('client_id', ''))} asks for access to {html.escape(where)}</h1>"
            f"<p>Scopes: <code>{html.escape(params.get('scope', ''))}</code></p>"
            f'<form method="post" action="/auth/authorize">{hidden}{patient}'
            '<button name="decision" value="approve">Approve</button>'
            '<button name="decision" value="deny">Deny</button></form>')
    return HTMLResponse(body, headers={"Cache-Control": "no-store", "X-Frame-Options": "DENY"})
