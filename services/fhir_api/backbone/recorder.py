"""Recording FHIR interactions made through a session base as `rounds.ehr.request` / `rounds.ehr.response`.

The FHIR app calls every callable in `app.state.interaction_listeners` with an `Interaction`
(services/fhir_api/http/interactions.py) after each request. `InteractionRecorder` turns an interaction made
through a session base (`/sessions/<id>/fhir`) into `rounds.ehr.request` then `rounds.ehr.response` on
`rounds.sessions`, keyed by the session id, with per-session `sequence` numbers from `SessionSequences`
(events/sequences.py: a counter row per session, so every producer and every API worker shares one sequence).
The response's `causationid` is the request event's id; both carry the request id as `correlationid`.

What the assistant saw is recorded whole: the response event lists the (type, id, versionId) of every
resource returned and carries the body exactly as sent, inline when the event fits the size limit, else as a
stored copy (events/blobs.py) it points to; request bodies likewise. A list of returned resources too long
for the event (a search of thousands of entries) is stored the same way (`resourcesRef`). The recorder is a
*gate* listener: the FHIR app holds the response until it is recorded (after the request left its admission
slot), and a failure to record answers 503 instead, counts in `RecorderHealth` and turns `GET /health`
unhealthy until a recording succeeds.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import orjson

from events.blobs import BlobStore
from events.bus import Bus
from events.catalog import CATALOG
from events.envelope import CloudEvent, EventTooLarge, is_opaque_id
from events.payloads import EhrRequest, EhrResponse, ResourceVersion
from events.sequences import SessionSequences
from events.topics import SESSIONS
from services.fhir_api.backbone.group_commit import GroupCommit
from services.fhir_api.http import urls
from services.fhir_api.http.interactions import Interaction

log = logging.getLogger(__name__)
SOURCE = "/rounds/fhir/sessions"
RECORDED_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"})
_HEX_DIGEST = re.compile(r"^(sha256:)?([0-9a-f]{64})$")


def _digest(value: Any) -> str | None:
    match = _HEX_DIGEST.match(str(value)) if value else None
    return f"sha256:{match.group(2)}" if match else None


def _query(value: Any) -> dict[str, list[str]]:
    if not value:
        return {}
    if isinstance(value, str):
        return parse_qs(value.lstrip("?"), keep_blank_values=True)
    if isinstance(value, dict):
        value = [(k, x) for k, v in value.items() for x in (v if isinstance(v, list | tuple) else [v])]
    out: dict[str, list[str]] = {}
    for k, v in value:  # a list of (name, value) pairs
        out.setdefault(str(k), []).append(str(v))
    return out


def _session_base(method: str, path: str) -> bool:
    """Whether `method` `path` is on a session's FHIR base (/sessions/<id>/fhir...), by the URL grammar
    (urls.py), and not on a route it marks unrecorded."""
    base = urls.on_base(path)
    if base is None or base.session_id is None:
        return False
    found = urls.match("GET" if method.upper() == "HEAD" else method, base.rest)
    return found is None or found.route.recorded


def returned_resources(body: bytes) -> list[ResourceVersion]:
    """(type, id, versionId) of what a response body gave the client: the resource itself, or each entry of a
    Bundle (its resource, or for a transaction/batch response without one, its `response.location`)."""
    try:
        doc = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return []
    if not isinstance(doc, dict):
        return []
    if doc.get("resourceType") != "Bundle":
        ref = _version_of(doc)
        return [ref] if ref else []
    out: list[ResourceVersion] = []
    for entry in doc.get("entry") or ():
        if not isinstance(entry, dict):
            continue
        ref = _version_of(entry.get("resource")) or _location_version(entry.get("response"))
        if ref:
            out.append(ref)
    return out


def _version_of(resource: Any) -> ResourceVersion | None:
    if not isinstance(resource, dict) or not resource.get("resourceType") or not resource.get("id"):
        return None
    meta = resource.get("meta")
    version = meta.get("versionId") if isinstance(meta, dict) else None
    return ResourceVersion(resource_type=resource["resourceType"], id=resource["id"],
                           version_id=str(version) if version is not None else None)


def _location_version(response: Any) -> ResourceVersion | None:
    location = response.get("location") if isinstance(response, dict) else None
    if not location:
        return None
    parts = location.split("/fhir/", 1)[-1].split("/")
    if len(parts) < 2 or not parts[0][:1].isupper():
        return None
    version = parts[3] if len(parts) >= 4 and parts[2] == "_history" else None
    return ResourceVersion(resource_type=parts[0], id=parts[1], version_id=version)


def _checked(event: CloudEvent) -> CloudEvent:
    """`event`, serialised once and cached (publish reuses it); raises EventTooLarge over the limit."""
    event.to_bytes()
    return event


@dataclass
class RecorderHealth:
    """Counters behind `GET /health`: recordings that succeeded and failed, and the last failure. Unhealthy
    while the latest attempt failed (a broker or database outage), healthy again once one succeeds."""

    recorded: int = 0
    failed: int = 0
    last_error: str | None = None
    last_failure_at: float | None = None
    healthy: bool = True
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def success(self, count: int = 1) -> None:
        with self._lock:
            self.recorded += count
            self.healthy = True

    def failure(self, error: BaseException, count: int = 1) -> None:
        with self._lock:
            self.failed += count
            self.last_error = f"{type(error).__name__}: {error}"[:500]
            self.last_failure_at = time.time()
            self.healthy = False

    def check(self) -> tuple[bool, dict[str, Any]]:
        """(healthy, details) for the health endpoint."""
        with self._lock:
            return self.healthy, {"recorded": self.recorded, "failed": self.failed,
                                  "lastError": self.last_error, "lastFailureAt": self.last_failure_at}


class InteractionRecorder:
    """Gate listener: records request + response of every interaction made through a session base before the
    client gets the response (services/fhir_api/http/interactions.py)."""

    before_response = True  # the app holds the response until this returns; raising turns it into a 503

    def __init__(self, bus: Bus, sequences: SessionSequences, blobs: BlobStore, topic: str = SESSIONS,
                 ) -> None:
        self.bus, self.sequences, self.blobs, self.topic = bus, sequences, blobs, topic
        self.health = RecorderHealth()
        # One thread per process records what every request in flight queued, as one batch (group commit);
        # batches run one at a time in queue order, so a session's exchanges keep their order.
        self.queue: GroupCommit[Interaction] = GroupCommit(self.record_batch, name="interaction-recorder")

    def events_for(self, interaction: Interaction, sequences: list[int]) -> list[CloudEvent]:
        session_id = interaction.session_id
        request_id = uuid.uuid4().hex
        base = urls.on_base(interaction.path)
        relative = (base.relative if base else "") or "/"
        request_body = b"".join(interaction.request_body)
        response_body = b"".join(interaction.response_body)

        def request(**body: Any) -> CloudEvent:
            return CATALOG.make(
                EhrRequest(request_id=request_id, method=interaction.method.upper(), url=relative,
                           query=_query(interaction.query), body_digest=_digest(interaction.request_digest),
                           content_type=interaction.request_content_type, **body),
                source=SOURCE, subject=session_id, sequence=sequences[0], correlationid=request_id,
            )

        first = self._fitted(request, request_body)
        listed = returned_resources(response_body)

        def response(**body: Any) -> CloudEvent:
            body.setdefault("resources", listed)
            return CATALOG.make(
                EhrResponse(request_id=request_id, status=interaction.status,
                            latency_ms=max(0.0, interaction.latency_ms),
                            body_digest=_digest(interaction.response_digest),
                            content_type=interaction.response_content_type, **body),
                source=SOURCE, subject=session_id, sequence=sequences[1], correlationid=request_id,
                causationid=first.id,
            )

        return [first, self._fitted(response, response_body, listed)]

    def _fitted(self, make: Any, body: bytes, listed: list[ResourceVersion] | None = None) -> CloudEvent:
        """The event with `body` inline when the serialised event fits the limit, else with a stored copy.
        A body that is not UTF-8 text is always stored (an event carries text). A response whose list of
        returned resources alone outgrows the event (thousands of entries) stores that list too
        (`resources_ref`): a valid request is always recorded, so it always answers."""
        if not body:
            return make()
        try:
            return _checked(make(body=body.decode(), body_size=len(body)))
        except (EventTooLarge, UnicodeDecodeError):
            pass
        stored = {"body_ref": self.blobs.put(body), "body_size": len(body)}
        try:
            return _checked(make(**stored))
        except EventTooLarge:
            if not listed:
                raise
        spilled = orjson.dumps([r.to_data() for r in listed])
        return make(**stored, resources=None, resources_ref=self.blobs.put(spilled))

    async def __call__(self, interaction: Interaction) -> None:
        """The gate the FHIR app awaits: the exchange is recorded off the event loop, with the others queued
        meanwhile, before the response goes out; raises when it could not be."""
        if self.recorded(interaction):  # /fhir traffic never pays for the queue
            await asyncio.wrap_future(self.queue.submit(interaction))

    def close(self) -> None:
        """Record what is queued and stop the recording thread (the app's shutdown)."""
        self.queue.close()

    @staticmethod
    def wants(method: str, path: str) -> bool:
        """Asked before the exchange (services/fhir_api/http/interactions.py): /fhir traffic is not teed."""
        return method.upper() in RECORDED_METHODS and _session_base(method, path)

    @staticmethod
    def recorded(interaction: Interaction) -> bool:
        """Only EHR calls made through a session's FHIR base are session events."""
        return bool(
            interaction.session_id
            and interaction.method.upper() in RECORDED_METHODS
            # not e.g. GET /sessions/<id> itself (not an EHR call), nor a route left unrecorded
            and _session_base(interaction.method, interaction.path)
            # An id no session can have (all digits, other characters: sessions are opened with opaque ids)
            # answered 404 and has no log; as a subject it would fail the envelope and turn that 404 into 503.
            and is_opaque_id(interaction.session_id)
        )

    def record(self, interaction: Interaction) -> None:
        """Record one exchange now, on the caller's thread (tools, tests; the app goes through the queue)."""
        self.record_batch([interaction])

    def record_batch(self, interactions: Sequence[Interaction]) -> None:
        """Publish each exchange's two events: the sessions' sequence numbers in one transaction, every event
        in one publish. Raises when they could not be recorded (after counting it): all or nothing."""
        todo = [one for one in interactions if self.recorded(one)]
        if not todo:
            return
        try:
            counts: Counter[str] = Counter()
            for one in todo:
                counts[one.session_id] += 2  # a request and a response event
            numbers = self.sequences.allocate_many(counts)
            taken = dict.fromkeys(numbers, 0)
            items: list[tuple[str, CloudEvent]] = []
            for one in todo:
                session_id, at = one.session_id, taken[one.session_id]
                taken[session_id] = at + 2
                items.extend((session_id, event)
                             for event in self.events_for(one, numbers[session_id][at:at + 2]))
            self.bus.publish_many(self.topic, items)
        except Exception as exc:
            self.health.failure(exc, len(todo))
            log.exception("could not record %d interaction(s), e.g. %s %s", len(todo), todo[0].method,
                          todo[0].path)
            raise
        self.health.success(len(todo))
