"""FinalState <-> the `rounds.sandbox.state` event: the sandbox as the scorer read it, kept in the log.

Every state is recorded: one over MAX_BYTES is stored whole in `event_blobs` (events/blobs.py; `store`
writes it, in the batch's transaction or before it) and its event names it (`stateRef`). Reading such an
event needs the blob (`stored_refs` -> `load_stored` in a connection); a log loaded without its blob reads
as no state (`None`), and the scorer then rebuilds it from the log's writes (replay.py)."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson
from sqlalchemy import Connection, inspect

from events.blobs import BLOBS, read
from events.catalog import CATALOG
from events.envelope import CloudEvent
from events.payloads import SandboxState
from services.consumers.scoring.check_inputs import FinalState, RecordValue, SharedValues, Written
from services.consumers.scoring.constraints import aware

SOURCE = "/rounds/scoring"
MAX_BYTES = 200 * 1024  # inside the 256 KiB event limit; a larger state goes to the blob store
_NAMESPACE = uuid.UUID("0b7a3f3e-54a9-5c2e-9a61-8d4f2b7c1e55")


Store = Callable[[bytes], str]  # bytes -> blob reference (events/blobs.py write/BlobStore.put)


def to_event(session_id: str, state: FinalState, time: str | None, store: Store | None = None,
             ) -> CloudEvent | None:
    """The event recording `state`; a state over MAX_BYTES is stored through `store` and named by the event
    (None without a `store`: nowhere to keep it). The id depends on the state only, inline or stored."""
    payload = SandboxState.model_validate({
        "writes": [{"resource_type": w.resource_type, "id": w.id, "version_id": w.version,
                    "deleted": w.deleted, "method": w.method, "resource": w.resource} for w in state.writes],
        "record_values": [{"code": v.code, "value": v.value, "unit": v.unit, "time": v.time,
                           "reference": v.reference} for v in state.record_values],
    })
    body = orjson.dumps(payload.to_data(), option=orjson.OPT_SORT_KEYS)
    if len(body) > MAX_BYTES:
        if store is None:
            return None
        payload = SandboxState(state_ref=store(body), state_size=len(body))
    digest = hashlib.sha256(body).hexdigest()
    return CATALOG.make(payload, source=SOURCE, subject=session_id,
                        id=uuid.uuid5(_NAMESPACE, f"{session_id}|{digest}").hex, time=time)


def stored_refs(events: Iterable[CloudEvent]) -> set[str]:
    """The blob references of the stored states among `events`."""
    return {ref for e in events if e.type == SandboxState.TYPE and isinstance(e.data, dict)
            and (ref := SandboxState.model_validate(e.data).state_ref)}


def load_stored(conn: Connection, refs: set[str]) -> dict[str, bytes]:
    """reference -> the stored state's JSON, for those of `refs` this database holds."""
    if not refs or not inspect(conn).has_table(BLOBS.name):
        return {}
    return read(conn, refs)


def from_data(data: dict[str, Any], stored: Mapping[str, bytes] | None = None) -> FinalState | None:
    """The final state a `rounds.sandbox.state` payload holds (validated here); a stored one from
    `stored`, None when that does not hold it."""
    return from_payload_stored(SandboxState.model_validate(data), stored)


def from_payload_stored(state: SandboxState, stored: Mapping[str, bytes] | None = None) -> FinalState | None:
    """The final state of a validated payload; a stored one (`state_ref`) from `stored`, None when that does
    not hold it."""
    if state.state_ref is not None:
        body = (stored or {}).get(state.state_ref)
        return None if body is None else from_data(orjson.loads(body))
    return from_payload(state)


def from_event(event: CloudEvent, stored: Mapping[str, bytes] | None = None) -> FinalState | None:
    """The final state of a `rounds.sandbox.state` event read from the log: its payload as the catalog
    validated it when decoding the event (not validated a second time); a stored state from `stored`
    (`load_stored`), None when that does not hold it.

    The record's values are the same in the states of every session on one patient (the shared record's
    results), and validating the same JSON gives the same list (events/payloads/sandbox.py): states holding
    one list share one SharedValues, whose derived forms the checks compute once."""
    state: SandboxState = CATALOG.payload(event)  # type: ignore[assignment]
    if state.state_ref is not None:
        body = (stored or {}).get(state.state_ref)
        return None if body is None else from_data(orjson.loads(body))
    found = _SHARED.get(id(state.record_values))
    if found is None or found[0] is not state.record_values:
        found = (state.record_values, SharedValues(_record_values(state)))
        if len(_SHARED) >= SHARED_STATES:
            _SHARED.pop(next(iter(_SHARED)))
        _SHARED[id(state.record_values)] = found  # the list is held: its id stays its own
    return FinalState(writes=_writes(state), record_values=found[1])


SHARED_STATES = 256  # distinct record value lists kept (patients of the runs being scored)
_SHARED: dict[int, tuple[list, SharedValues]] = {}


def from_payload(state: SandboxState) -> FinalState:
    return FinalState(writes=_writes(state), record_values=_record_values(state))


def _writes(state: SandboxState) -> list[Written]:
    return [Written(w.resource_type, w.id, w.version_id, w.deleted, w.method, w.resource)
            for w in state.writes]


def _record_values(state: SandboxState) -> list[RecordValue]:
    return [RecordValue(v.code, v.value, v.unit, v.time and aware(v.time), v.reference)
            for v in state.record_values]
