"""What a Subscription may make the delivering consumer send, and where: the operator's policy.

Delivery POSTs from inside the deployment, so an endpoint is a request the server makes on a client's behalf
(server-side request forgery). The operator names the hosts it may reach (`ROUNDS_SUBSCRIPTION_ENDPOINTS`:
`host` or `host:port`, comma-separated; default loopback and the compose network's application services),
and which `channel.header` names a client may set (`ROUNDS_SUBSCRIPTION_HEADERS`; unset: any name but the
RESERVED ones, which carry credentials, address another host or frame the request, and are always refused).
A refusal names the policy, never whether the host answered: the reason is stored in `Subscription.error`,
readable by the client. And who may receive: `session_binder` lets a websocket bind a Subscription only with a
token of the base it is stored on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import httpx

from events.payloads.outcome import SHARED_RECORD
from services.fhir_api.subscriptions.subscription import LIVE, BadSubscription, Subscription, channel_headers

DEFAULT_HOSTS = "localhost,127.0.0.1,::1,api,simulator,transcript,scorer"
# Header names (lower case; a trailing `*` is a prefix) a client never sets: credentials, another host, the
# request's framing, and the headers delivery itself writes.
RESERVED = ("authorization", "proxy-*", "host", "cookie", "forwarded", "x-forwarded-*", "x-real-ip",
            "content-*", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer",
            "expect", "x-rounds-*")


def _reserved(name: str) -> bool:
    low = name.lower()
    return any(low.startswith(r[:-1]) if r.endswith("*") else low == r for r in RESERVED)


def _names(text: str) -> frozenset[str]:
    return frozenset(part.strip().lower() for part in text.split(",") if part.strip())


@dataclass(frozen=True)
class EndpointPolicy:
    hosts: frozenset[str]  # lower-case `host` or `host:port` (IPv6 without brackets)
    headers: frozenset[str] | None = None  # allowed names (lower case); None: any that is not RESERVED

    @classmethod
    def of(cls, hosts: str | None = None, headers: str | None = None) -> EndpointPolicy:
        return cls(_names(DEFAULT_HOSTS if hosts is None else hosts), _names(headers) if headers else None)

    def check(self, sub: Subscription) -> None:
        """BadSubscription when the operator does not allow what `sub` asks delivery to send."""
        self._check(sub.channel, sub.endpoint, sub.headers)

    def check_write(self, doc: dict) -> None:
        """At create and update: BadSubscription when a Subscription delivery would act on (`requested`,
        `active`, `error`) names an endpoint or headers delivery may never send, so the client learns it
        at once (422) rather than from `error` after the handshake. Criteria stay the handshake's to judge
        (they are searched in the base's context). `off` is not checked: a client can always switch off a
        Subscription the operator's policy has since come to refuse."""
        if doc.get("status") not in LIVE:
            return
        channel = doc.get("channel") if isinstance(doc.get("channel"), dict) else {}
        self._check(str(channel.get("type", "")), str(channel.get("endpoint", "")), channel_headers(channel))

    def _check(self, channel: str, endpoint: str, headers: tuple[tuple[str, str], ...]) -> None:
        for name, _ in headers:
            if _reserved(name) or (self.headers is not None and name.lower() not in self.headers):
                raise BadSubscription(f"channel.header {name[:40]!r} is not one the operator allows")
        if channel != "rest-hook":
            return
        try:
            url = httpx.URL(endpoint)
            host, port = url.host.lower(), url.port
        except Exception as exc:  # noqa: BLE001 - httpx raises several types for one malformed URL
            raise BadSubscription("channel.endpoint is not a valid http(s) URL") from exc
        if url.scheme not in ("http", "https") or not host or url.userinfo or not 0 < (port or 80) < 65536:
            raise BadSubscription("channel.endpoint must be http(s)://host[:port]/path, without credentials")
        if host not in self.hosts and (port is None or f"{host}:{port}" not in self.hosts):
            raise BadSubscription("channel.endpoint is not on the operator's allow-list "
                                  "(ROUNDS_SUBSCRIPTION_ENDPOINTS)")


def token_base(key, revocations) -> Callable[[str], str | None]:
    """`session_binder`'s `verify`: the base a live token is bound to (a session id, '' for the shared
    record); None for a token that is forged, expired or revoked (the list `/auth/revoke` writes, re-read
    at most once a second, so a revoked token stops binding, and a bound socket is closed at the hub's
    next re-check)."""
    from services.fhir_api.auth.tokens import InvalidToken, verify

    def base_of(token: str) -> str | None:
        try:
            grant = verify(key, token)
        except InvalidToken:
            return None
        return None if revocations.is_revoked(grant.jti) else grant.session or SHARED_RECORD

    return base_of


def session_binder(store, verify: Callable[[str], str | None]) -> Callable[[str, str | None], bool]:
    """The websocket hub's `may_bind` under access control: the token must be valid (`verify` gives the base
    it is bound to: a session id, '' for the shared record, None when invalid or revoked), its session open,
    and the Subscription stored on that very base."""
    from services.fhir_api.store.interface import Context, StoreError

    def may_bind(id: str, token: str | None) -> bool:
        session = verify(token) if token else None
        if session is None:
            return False
        if session:  # a session's token dies with its session (as its FHIR base answers 410 then)
            ctx = store.get_session(session)
            if ctx is None or ctx.ended:
                return False
        try:
            stored = store.read(Context(session_id=session or None), "Subscription", id)
        except StoreError:
            return False
        return stored.session == session

    return may_bind
