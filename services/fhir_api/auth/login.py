"""`/auth/login`: the user of an authorization request proves who they are before any consent.

GET answers the login form (carrying the authorization request's parameters); POST checks the name and the
password against the user store (users.py) and, when they match, sets the login cookie and sends the browser
back to `/auth/authorize` with the same parameters — always this server's own path, never a URL the request
names, so the form is no open redirect.

The login cookie is a JWT on the deployment key with its own issuer (`rounds/login`: never an access token,
code or launch): the user's name and a random `csrf` value the consent form must post back. HttpOnly,
SameSite=Lax (the app's top-level GET to /auth/authorize carries it, a cross-site POST does not), Path=/auth.
"""

from __future__ import annotations

import html
import secrets
import time
from urllib.parse import parse_qsl, urlencode

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from joserfc import jwt
from starlette.concurrency import run_in_threadpool

from services.fhir_api.auth.throttle import keys
from services.fhir_api.auth.tokens import InvalidToken, open_signed, sign
from services.fhir_api.auth.users import User, authenticate_user, find_user
from services.fhir_api.http.links import external_root

router = APIRouter(tags=["auth"])
COOKIE = "rounds_login"
LOGIN_SECONDS = 3600
AUTHORIZE_PARAMS = ("response_type", "client_id", "redirect_uri", "scope", "state", "aud", "code_challenge",
                    "code_challenge_method", "launch", "nonce")
_CLAIMS = jwt.JWTClaimsRegistry(iss={"essential": True, "value": "rounds/login"}, exp={"essential": True},
                                sub={"essential": True}, csrf={"essential": True})
NO_STORE = {"Cache-Control": "no-store", "X-Frame-Options": "DENY"}


def engine(request: Request):
    return request.app.state.auth.store.engine


def logged_in(request: Request) -> tuple[str, str] | None:
    """(user name, csrf value) of the request's login cookie, if it carries a valid one."""
    cookie = request.cookies.get(COOKIE)
    if not cookie:
        return None
    try:
        claims = open_signed(request.app.state.auth.key, cookie, _CLAIMS, "login")
    except InvalidToken:
        return None
    return str(claims["sub"]), str(claims["csrf"])


async def current_user(request: Request) -> tuple[User, str] | None:
    """The logged-in user and the csrf value their consent form must carry; None when nobody is."""
    session = logged_in(request)
    if session is None:
        return None
    user = await run_in_threadpool(find_user, engine(request), session[0])
    return None if user is None else (user, session[1])


async def configured_user(request: Request) -> User | None:
    """ROUNDS_AUTH_AUTO_APPROVE_USER: the operator-configured user unattended approvals act for."""
    name = request.app.state.settings.auth_auto_approve_user
    return await run_in_threadpool(find_user, engine(request), name) if name else None


def login_redirect(request: Request, params: dict[str, str]) -> RedirectResponse:
    root = external_root(request, request.app.state.settings)
    return RedirectResponse(f"{root}/auth/login?{urlencode(params)}", status_code=303, headers=NO_STORE)


def _form(params: dict[str, str], status: int = 200, error: str = "", retry_after: int | None = None
          ) -> HTMLResponse:
    hidden = "".join(f'<input type="hidden" name="{k}" value="{html.escape(v)}">' for k, v in params.items())
    note = f'<p role="alert">{html.escape(error)}</p>' if error else ""
    body = ("<!doctype html><title>Rounds login</title><h1>Log in to approve an app</h1>" + note +
            f'<form method="post" action="/auth/login">{hidden}'
            '<label>User <input name="username" autocomplete="username" required></label>'
            '<label>Password <input name="password" type="password" autocomplete="current-password" '
            'required></label><button>Log in</button></form>')
    headers = NO_STORE if retry_after is None else {**NO_STORE, "Retry-After": str(retry_after)}
    return HTMLResponse(body, status, headers=headers)


@router.get("/auth/login", summary="the login form of SMART App Launch", include_in_schema=False)
async def login_form(request: Request) -> Response:
    return _form({k: v for k, v in request.query_params.items() if k in AUTHORIZE_PARAMS})


@router.post("/auth/login", summary="log in (then back to /auth/authorize)", include_in_schema=False)
async def login(request: Request) -> Response:
    if request.app.state.auth is None:
        return HTMLResponse("access control is off on this server (ROUNDS_AUTH)", 400, headers=NO_STORE)
    try:
        form = dict(parse_qsl((await request.body()).decode(), keep_blank_values=True))
    except (UnicodeDecodeError, ValueError):
        return HTMLResponse("the login form must be application/x-www-form-urlencoded", 400, headers=NO_STORE)
    params = {k: v for k, v in form.items() if k in AUTHORIZE_PARAMS}
    throttle, counted = request.app.state.auth.throttle, keys("login", form.get("username", ""), request)
    wait = throttle.retry_after(*counted)  # before scrypt: a refused guess costs nothing
    if wait is not None:
        return _form(params, 429, f"too many failed logins: try again in {wait} s", retry_after=wait)
    user = await run_in_threadpool(authenticate_user, engine(request), form.get("username", ""),
                                   form.get("password", ""))
    if user is None:
        throttle.failed(*counted)
        return _form(params, 401, "unknown user or wrong password")
    throttle.succeeded(counted[0])
    now = int(time.time())
    cookie = sign(request.app.state.auth.key, {"iss": "rounds/login", "sub": user.name, "iat": now,
                                               "exp": now + LOGIN_SECONDS, "csrf": secrets.token_urlsafe(24)})
    root = external_root(request, request.app.state.settings)
    answer = RedirectResponse(f"{root}/auth/authorize?{urlencode(params)}", status_code=303, headers=NO_STORE)
    answer.set_cookie(COOKIE, cookie, max_age=LOGIN_SECONDS, path="/auth", httponly=True, samesite="lax",
                      secure=request.url.scheme == "https")
    return answer
