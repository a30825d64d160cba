"""The pre-flight of the webhook adapters (`http:`, `https:`, `mcp:`): before the first session, prove the
assistant's URL answers, so a wrong port or a stopped agent stops the run with one message naming the URL
instead of failing every session with `infrastructure_error`.

Any HTTP answer proves the endpoint is there (a webhook need not serve HEAD: 404 or 405 is fine); only a
connection that cannot be made, or no answer within the timeout, stops the run.
"""

from __future__ import annotations

import httpx

from services.simulator.assistant_protocol import EndpointUnavailable


def checked_url(url: str, spec: str) -> str:
    """`url` if it is an absolute http(s) URL with a host, else ValueError naming the spec."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise ValueError(f"{spec}: {url!r} is not a URL ({exc})") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ValueError(f"expected {spec}:<an http(s) URL with a host>, got {url!r}")
    return url


async def preflight(client: httpx.AsyncClient, url: str, what: str, timeout_s: float = 10.0) -> str:
    """What the endpoint answered, or EndpointUnavailable naming `url`."""
    try:
        response = await client.head(url, timeout=timeout_s)
    except httpx.TransportError as exc:
        raise EndpointUnavailable(f"cannot reach the {what} {url}: {exc!r}") from None
    return f"{url} answers (HTTP {response.status_code} to HEAD)"
