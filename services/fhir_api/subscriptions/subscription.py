"""A stored R4 `Subscription` read as what delivery needs (data only; behaviour is in delivery.py).

R4 fields: `status` (requested | active | error | off), `criteria` (`Type?search`), `channel.type`
(`rest-hook`, `websocket`), `channel.endpoint`, `channel.header` ("Name: value"), `channel.payload` (a MIME
type; absent: no content). From the Subscriptions R5 Backport IG: the payload content code on
`channel._payload` (`empty`, `id-only`, `full-resource`) and `channel` extension `backport-heartbeat-period`
(seconds). A channel payload without the content code is `full-resource` (R4's meaning of a payload).

The Backport IG's topic-based form fits where a topic is a resource type's changes: `criteria` is then the
topic's canonical URL and the search is the `backport-filter-criteria` extension on `_criteria` (one filter,
`Type?params`); notifications name that canonical as their `topic`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl

from services.fhir_api.store.interface import StoredResource

BACKPORT = "http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition"
PAYLOAD_CONTENT = f"{BACKPORT}/backport-payload-content"
HEARTBEAT = f"{BACKPORT}/backport-heartbeat-period"
FILTER = f"{BACKPORT}/backport-filter-criteria"
# Set by delivery at the handshake: the time of the write that asked for it; older changes are not notified.
SINCE = "https://rounds.dev/fhir/StructureDefinition/subscription-active-since"
CHANNELS = frozenset({"rest-hook", "websocket"})
CONTENTS = frozenset({"empty", "id-only", "full-resource"})
# RFC 9110: a header name is a token; a value visible ASCII, spaces and tabs (no line breaks, nothing the
# HTTP client would refuse to encode at delivery time).
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")
HEADER_VALUE = re.compile(r"^[\x20-\x7e\t]{0,1024}$")
LIVE = frozenset({"requested", "active", "error"})  # statuses delivery acts on ("off": never)


class BadSubscription(ValueError):
    """What makes a Subscription undeliverable (its status becomes `error` with this text)."""


@dataclass(frozen=True)
class Subscription:
    id: str
    session: str  # '' = the shared record
    status: str
    resource_type: str  # of the criteria
    params: tuple[tuple[str, str], ...]
    channel: str
    endpoint: str
    content: str  # empty | id-only | full-resource
    headers: tuple[tuple[str, str], ...] = ()
    heartbeat_s: int | None = None
    since: str | None = None  # SINCE
    topic: str | None = None  # the topic-based form's canonical URL

    @property
    def key(self) -> tuple[str, str]:
        return self.session, self.id


def _extension(element: dict, url: str) -> dict | None:
    return next((e for e in element.get("extension", []) if e.get("url") == url), None)


def parse(stored: StoredResource, doc: dict) -> Subscription:
    """The Subscription `doc` (stored as `stored`) describes; BadSubscription when it cannot be delivered."""
    criteria, topic = str(doc.get("criteria", "")), None
    if criteria.startswith(("http://", "https://")):
        filters = [e.get("valueString", "") for e in (doc.get("_criteria") or {}).get("extension", [])
                   if e.get("url") == FILTER]
        if len(filters) != 1:
            raise BadSubscription("a topic-based Subscription needs exactly one backport-filter-criteria "
                                  "('Type?search parameters')")
        criteria, topic = filters[0], criteria
    rtype, _, query = criteria.partition("?")
    if not rtype or not rtype[0].isupper() or not rtype.isalpha():
        raise BadSubscription(f"criteria must be 'Type?search parameters', not {criteria[:80]!r}")
    channel = doc.get("channel") or {}
    kind = channel.get("type")
    if kind not in CHANNELS:
        raise BadSubscription(f"channel.type {kind!r} is not supported (rest-hook, websocket)")
    endpoint = str(channel.get("endpoint", ""))
    if kind == "rest-hook" and not endpoint.startswith(("http://", "https://")):
        raise BadSubscription("a rest-hook channel needs an http(s) endpoint")
    code = (_extension(channel.get("_payload") or {}, PAYLOAD_CONTENT) or {}).get("valueCode")
    content = code or ("full-resource" if channel.get("payload") else "empty")
    if content not in CONTENTS:
        raise BadSubscription(f"payload content {content!r} is not one of {', '.join(sorted(CONTENTS))}")
    headers = channel_headers(channel)
    beat = (_extension(channel, HEARTBEAT) or {}).get("valueUnsignedInt")
    since = (_extension(doc, SINCE) or {}).get("valueInstant")
    return Subscription(stored.id, stored.session, str(doc.get("status", "")), rtype,
                        tuple(parse_qsl(query, keep_blank_values=True)), kind, endpoint, content,
                        headers, int(beat) if beat else None, since, topic)


def channel_headers(channel: dict) -> tuple[tuple[str, str], ...]:
    """`channel.header` as (name, value) pairs; BadSubscription unless each is 'Name: value' in printable
    ASCII (no line breaks: nothing that could add a header or that the HTTP client cannot encode)."""
    lines = channel.get("header", [])
    if not isinstance(lines, list):
        raise BadSubscription("channel.header must be a list of 'Name: value' strings")
    headers = []
    for line in lines:
        name, sep, value = str(line).partition(":")
        if not sep or not HEADER_NAME.match(name.strip()) or not HEADER_VALUE.match(value.strip()):
            raise BadSubscription("channel.header must be 'Name: value' in printable ASCII")
        headers.append((name.strip(), value.strip()))
    return tuple(headers)
