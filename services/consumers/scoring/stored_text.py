"""The whole text of a message too large for an event (events/payloads/messages.py
`Communication.stored_text`): its event carries the first 64 KiB inline and names the whole in `event_blobs`
(events/blobs.py). The scorer judges the answer the assistant gave, so it reads the whole text; the report's
conversation view keeps the head. Likewise the list of resources an EHR response returned when it was too
long for its event (`rounds.ehr.response` `resourcesRef`): grounding needs what the assistant was given.

`refs(events)` finds the references a session's messages hold; `load(conn, refs)` reads them in the caller's
connection (the scorer's transaction: a database read, no network). A reference not stored here (a log
loaded elsewhere) is left out, and its message is judged by its head.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, inspect

from contracts.trajectory import WRITE_METHODS, Trajectory
from contracts.trajectory_log import LoggedEvent, build_trajectory
from events.blobs import BLOBS, read
from events.payloads import Communication, EhrRequest, EhrResponse
from events.payloads.messages import FULL_CHECK, MESSAGE_PREFIX


def refs(events: Iterable[Any]) -> set[str]:
    """The references of the messages, stored resource lists, stored response bodies (scorer v4 grounds a
    fact on the values a response carried) and stored write request bodies (a replay applies them) among
    `events` (LoggedEvent-like: `.type`, `.data`), each read by its payload class."""
    found: set[str | None] = set()
    token = FULL_CHECK.set(False)  # logged messages passed the full FHIR model when they were published
    try:
        for e in events:
            if e.type.startswith(MESSAGE_PREFIX):
                found.add(Communication.model_validate(e.data or {}).stored_text)
            elif e.type == EhrResponse.TYPE:
                response = EhrResponse.model_validate(e.data or {})
                found.update((response.body_ref, response.resources_ref))
            elif e.type == EhrRequest.TYPE:
                request = EhrRequest.model_validate(e.data or {})
                found.add(request.body_ref if request.method in WRITE_METHODS else None)
    finally:
        FULL_CHECK.reset(token)
    return {ref for ref in found if ref}


def trajectory(conn: Connection, session_id: str, events: list[LoggedEvent]) -> Trajectory:
    """The session's trajectory with the whole texts, resource lists and bodies this database stores: how
    the consumer and `rounds score` read a session they hold in a database."""
    return build_trajectory(session_id, events, load(conn, refs(events)))


def load(conn: Connection, wanted: set[str]) -> dict[str, str]:
    """reference -> whole text, for those of `wanted` stored in this database."""
    if not wanted or not inspect(conn).has_table(BLOBS.name):
        return {}
    return {ref: content.decode(errors="replace") for ref, content in read(conn, wanted).items()}
