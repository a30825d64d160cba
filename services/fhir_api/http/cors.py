"""Cross-origin access for browser apps (SMART's JavaScript client): which origins may call the API.

A SMART app in a browser runs on its own origin and reaches discovery, the token endpoint and the FHIR API
with `fetch`, so every answer must carry `Access-Control-Allow-Origin` and a preflight (`OPTIONS` with
`Access-Control-Request-Method`) must be answered before any bearer token is asked for: the browser sends
none with it. The layer is outermost (app.py) so a 401, a 413 or a 500 still reaches the app readable.

`ROUNDS_CORS_ORIGINS`: `loopback` (default: any port of localhost, 127.0.0.1 and [::1], the development
set-up), `*` (any origin), `off`, or a comma-separated list of origins (`https://app.example:8443`).
No cookies cross origins (`allow_credentials` off): apps authenticate with their bearer token, and the
login cookie of `/auth/authorize` stays with this server's own pages.
"""

from __future__ import annotations

from typing import Any

from starlette.middleware.cors import CORSMiddleware

LOOPBACK = r"https?://(localhost|127\.0\.0\.1|\[::1\])(:\d+)?"
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
# what a FHIR client reads off answers: where a create or an async job went, versions, the auth challenge
EXPOSED = ("Location", "Content-Location", "ETag", "Last-Modified", "WWW-Authenticate", "X-Progress",
           "Retry-After", "Expires", "X-Request-Id")


def origins(setting: str) -> tuple[tuple[str, ...], str | None] | None:
    """(exact origins, origin regex) for ROUNDS_CORS_ORIGINS; None when cross-origin access is off.
    ValueError on an entry that is not an origin (a path or no scheme), which would never match."""
    value = setting.strip()
    if value.lower() in ("", "off", "none", "false"):
        return None
    if value.lower() == "loopback":
        return (), LOOPBACK
    if value == "*":
        return ("*",), None
    listed = tuple(o.strip().rstrip("/") for o in value.split(",") if o.strip())
    for origin in listed:
        scheme, sep, rest = origin.partition("://")
        if scheme not in ("http", "https") or not sep or not rest or "/" in rest:
            raise ValueError(f"ROUNDS_CORS_ORIGINS: {origin!r} is not an origin (scheme://host[:port])")
    return listed, None


def enabled(settings: Any) -> bool:
    """Whether browsers on other origins may call this server (the SMART configuration's `cors`)."""
    return origins(getattr(settings, "cors_origins", "loopback")) is not None


def install_cors(app: Any, settings: Any) -> None:
    """Add the CORS layer (call last: it must be outermost) unless ROUNDS_CORS_ORIGINS is off."""
    allowed = origins(settings.cors_origins)
    if allowed is None:
        return
    exact, regex = allowed
    app.add_middleware(CORSMiddleware, allow_origins=exact, allow_origin_regex=regex, allow_methods=METHODS,
                       allow_headers=["*"], expose_headers=EXPOSED, max_age=600)
