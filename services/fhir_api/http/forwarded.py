"""Forwarded headers, honoured only from trusted proxies (ROUNDS_TRUSTED_PROXIES).

`Forwarded` (RFC 7239) and `X-Forwarded-Proto/-Host/-Port/-Prefix` say how a client addressed a reverse proxy,
so links can point back through it. Any client can send them too: trusted blindly, `X-Forwarded-Host:
evil.example` makes every Bundle link and Location header of the answer point there (and a cache in front
stores it for everyone). So they count only when the TCP peer (the ASGI scope's `client`) is a configured
proxy address or network; by default no peer is trusted. `rounds serve` runs uvicorn with its own proxy-header
rewriting off, so the peer is the real one (uvicorn trusts 127.0.0.1 by default and would otherwise rewrite
the scheme and client address from the same headers).

Of a header listing several hops, the LAST entry counts: the one the trusted peer added itself; what stands
to its left came from whoever connected to that proxy. A proxy that overwrites the headers sends one entry.
`Forwarded` wins over the X- headers when both are present.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from fastapi import Request

from rounds.settings import Network, proxy_networks


@lru_cache(maxsize=16)
def trusted_networks(configured: str) -> tuple[Network, ...] | None:
    """The networks of ROUNDS_TRUSTED_PROXIES (None: every peer), parsed once per value; the parser is the
    settings' own (rounds/settings.py), which validates the list at start-up."""
    return proxy_networks(configured)


def is_trusted(peer: str | None, networks: tuple[Network, ...] | None) -> bool:
    """Whether the TCP peer address is one of the trusted proxies (`networks` None: every peer is)."""
    if networks is None:
        return True
    if not peer:
        return False  # no address (a Unix socket, an in-process transport): not a configured proxy
    try:
        address = ipaddress.ip_address(peer)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in network for network in networks)


def forwarded_root(request: Request, networks: tuple[Network, ...] | None) -> str | None:
    """scheme://host[:port][/prefix] the trusted proxy in front says the client used, or None when the peer
    is not trusted or forwarded nothing (the request's own root applies then)."""
    client = request.scope.get("client")
    if not is_trusted(client[0] if client else None, networks):
        return None
    headers = request.headers
    proto, host = _rfc7239(headers.get("forwarded"))
    if proto is None and host is None:
        proto, host = _last(headers.get("x-forwarded-proto")), _last(headers.get("x-forwarded-host"))
        port = _last(headers.get("x-forwarded-port"))
        if host and port and port.isdigit() and not _has_port(host):
            host = f"{host}:{port}"
    forwarded_prefix = _last(headers.get("x-forwarded-prefix"))
    if proto is None and host is None and forwarded_prefix is None:
        return None
    scheme = (proto or request.url.scheme).lower()
    if scheme not in ("http", "https") or (host is not None and not _plausible_host(host)):
        return None  # not a URL part: ignore the headers rather than build a broken link
    netloc = host or headers.get("host") or request.url.netloc
    prefix = (forwarded_prefix or "").strip("/")
    if prefix and not all(c in _PATH_CHARS for c in prefix):
        return None
    prefix = f"/{prefix}" if prefix else ""
    return f"{scheme}://{netloc}{prefix}"


def _last(value: str | None) -> str | None:
    """The last comma-separated entry of a header, stripped; None when absent or empty."""
    if not value:
        return None
    entry = value.rsplit(",", 1)[-1].strip()
    return entry or None


def _rfc7239(value: str | None) -> tuple[str | None, str | None]:
    """(proto, host) of the last element of a `Forwarded` header."""
    element = _last(value)
    if element is None:
        return None, None
    found: dict[str, str] = {}
    for pair in element.split(";"):
        name, sep, raw = pair.partition("=")
        if sep:
            found[name.strip().lower()] = raw.strip().strip('"')
    return found.get("proto") or None, found.get("host") or None


def _has_port(host: str) -> bool:
    return host.rsplit("]", 1)[-1].count(":") == 1 if host.startswith("[") else ":" in host


_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_HOST_CHARS = frozenset(_ALNUM + ".-:[]_")
_PATH_CHARS = frozenset(_ALNUM + ".-_~/")


def _plausible_host(host: str) -> bool:
    """A host[:port] with no path, user info or spaces (the proxy's value goes into every link)."""
    return bool(host) and len(host) <= 255 and all(c in _HOST_CHARS for c in host)
