"""A simulator event too large for the log keeps its place: its large part is stored in `event_blobs`, as the
FHIR server's recorder stores a large EHR body, and the event carries the head and the reference.

An assistant that answers with 600 kB is the assistant's doing: the session must go on and be scored, not end
in `infrastructure_error: EventTooLarge`. A message keeps the head of its text as `contentString` (what the
scorer reads) and names the whole as a FHIR Attachment (`contentAttachment.url` = `urn:rounds:blob:sha256:…`,
`Communication.stored_text`); a tool call's arguments and a tool result's output become `{"storedRef",
"storedSize", "head"}`. The bytes are stored before the event is written, so no reader meets a reference it
cannot resolve. Which field of which type: data/oversize.json.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from events.blobs import BlobStore
from events.payloads.messages import STORED_PREFIX


@cache
def rules() -> dict[str, Any]:
    return json.loads(resources.files(__package__).joinpath("data/oversize.json").read_text())


def _head(text: str, limit: int) -> str:
    return text.encode()[:limit].decode(errors="ignore")


def stored(type_: str, data: dict[str, Any], blobs: BlobStore) -> dict[str, Any] | None:
    """`data` (an event's JSON payload) with its large part stored; None when the type has no such rule."""
    field, limit = rules()["fields"].get(type_), rules()["head_bytes"]
    if field == "communication":
        text = "\n".join(p["contentString"] for p in data["payload"] if "contentString" in p)
        whole = text.encode()
        stub = {"contentType": "text/plain; charset=utf-8", "url": STORED_PREFIX + blobs.put(whole),
                "size": len(whole)}
        head = _head(text, limit) + f"…[{len(whole) - len(_head(text, limit).encode())} more bytes stored]"
        return {**data, "payload": [{"contentString": head}, {"contentAttachment": stub}]}
    if field in ("arguments", "output"):
        text = json.dumps(data.get(field), ensure_ascii=False)
        whole = text.encode()
        return {**data, field: {"storedRef": blobs.put(whole), "storedSize": len(whole),
                                "head": _head(text, limit)}}
    return None
