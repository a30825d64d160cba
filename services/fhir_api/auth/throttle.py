"""Failed credentials slow their guesser down: `/auth/login` (a user's password) and the token endpoint's
client authentication (a client's secret) refuse further tries for a while once too many failed.

Counted twice, so neither one address trying many accounts nor many addresses trying one account gets far:
per account (the user name, the client id) and per client address (the peer, or the address a trusted proxy
names in `X-Forwarded-For`). A key with `attempts` failures within the last `window_s` seconds is refused —
429, `Retry-After` the seconds until its oldest failure leaves the window — *before* the password is
checked, so a refused guess costs no scrypt (the login endpoint is no CPU sink either). A success clears the
account's failures (its user got in), never the address's (one valid account would otherwise reset an
attacker's count).

In memory, per process: `rounds serve --workers N` lets up to N × `attempts` guesses through per window, and
a restart forgets. Enough to make guessing a password impractical; a front proxy may limit more.
"""

from __future__ import annotations

import base64
import binascii
import functools
import math
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from services.fhir_api.http.forwarded import is_trusted, trusted_networks

MAX_KEYS = 100_000  # keys kept at most: beyond, the stalest are forgotten (memory stays bounded)


class Throttle:
    def __init__(self, attempts: int, window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.attempts, self.window_s, self.clock = attempts, window_s, clock
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, key: str, now: float) -> deque[float]:
        times = self._failures.get(key)
        if times is None:
            return deque()
        while times and times[0] <= now - self.window_s:
            times.popleft()
        if not times:
            del self._failures[key]
        return times

    def retry_after(self, *keys: str) -> int | None:
        """Seconds until every key may try again, or None when none is over its limit."""
        now = self.clock()
        with self._lock:
            waits = [times[0] + self.window_s - now for key in keys
                     if len(times := self._recent(key, now)) >= self.attempts]
        return max(1, math.ceil(max(waits))) if waits else None

    def failed(self, *keys: str) -> None:
        now = self.clock()
        with self._lock:
            if len(self._failures) >= MAX_KEYS:
                del self._failures[next(iter(self._failures))]  # the longest-known key
            for key in keys:
                self._failures.setdefault(key, deque()).append(now)

    def succeeded(self, key: str) -> None:
        with self._lock:
            self._failures.pop(key, None)


def client_address(request: Request) -> str:
    """The address the request came from: the peer, or the last `X-Forwarded-For` entry when the peer is a
    trusted proxy (ROUNDS_TRUSTED_PROXIES), which is the address that proxy saw."""
    peer = request.client.host if request.client else "unknown"
    forwarded = request.headers.get("x-forwarded-for")
    if forwarded and is_trusted(peer, trusted_networks(request.app.state.settings.trusted_proxies)):
        return forwarded.rsplit(",", 1)[-1].strip() or peer
    return peer


def keys(kind: str, account: str, request: Request) -> tuple[str, str]:
    """The two counters one attempt counts in: `kind` (login, client) per account and per address."""
    return f"{kind}:account:{account}", f"{kind}:address:{client_address(request)}"


def _client_id(request: Request, form: dict[str, str]) -> str:
    header = request.headers.get("authorization", "")
    if header.lower().startswith("basic "):
        try:
            return base64.b64decode(header[6:].strip(), validate=True).decode().partition(":")[0]
        except (binascii.Error, UnicodeDecodeError):
            return ""
    return form.get("client_id", "")


def throttled_client_auth(endpoint: Callable[[Request], Awaitable[Response]]
                          ) -> Callable[[Request], Awaitable[Response]]:
    """The token endpoint, its failed client authentications (401 `invalid_client`) counted per client id and
    per address; over the limit, 429 `temporarily_unavailable` with Retry-After before any secret is
    checked."""

    @functools.wraps(endpoint)
    async def guarded(request: Request) -> Response:
        auth = request.app.state.auth
        if auth is None:
            return await endpoint(request)
        try:
            form = dict(parse_qsl((await request.body()).decode(), keep_blank_values=True))
        except (UnicodeDecodeError, ValueError):
            form = {}
        counted = keys("client", _client_id(request, form), request)
        wait = auth.throttle.retry_after(*counted)
        if wait is not None:
            return JSONResponse({"error": "temporarily_unavailable", "error_description":
                                 f"too many failed client authentications: try again in {wait} s"}, 429,
                                headers={"Retry-After": str(wait), "Cache-Control": "no-store"})
        answer = await endpoint(request)
        if answer.status_code == 401:
            auth.throttle.failed(*counted)
        elif answer.status_code == 200:
            auth.throttle.succeeded(counted[0])
        return answer

    return guarded
