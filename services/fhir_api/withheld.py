"""Elements stored for the server's own use and never served: what a client wrote as a secret for the server
to send on (a Subscription's `channel.header`, e.g. the receiver's API key) is not readable back by anyone —
not by read, vread, search, includes, `_history`, batch, a write's returned representation, or `$export`.

One table (WITHHELD: type -> element paths) and one function every serving path calls on the stored bytes;
the store keeps the element (delivery reads it there).
"""

from __future__ import annotations

import orjson

from services.fhir_api.store.interface import StoredResource

WITHHELD: dict[str, tuple[tuple[str, ...], ...]] = {
    "Subscription": (("channel", "header"),),
}


def _drop(node: object, path: tuple[str, ...]) -> bool:
    if not isinstance(node, dict) or not path:
        return False
    if len(path) == 1:
        return node.pop(path[0], None) is not None
    return _drop(node.get(path[0]), path[1:])


def served(stored: StoredResource) -> bytes:
    """The stored JSON as a reader may see it: unchanged (the same bytes) unless the type withholds an
    element that is present."""
    paths = WITHHELD.get(stored.resource_type)
    if not paths:
        return stored.raw
    doc = orjson.loads(stored.raw)
    dropped = [_drop(doc, path) for path in paths]
    return orjson.dumps(doc) if any(dropped) else stored.raw
