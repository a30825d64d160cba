"""FinalState <-> the `rounds.sandbox.state` event: the sandbox as the scorer read it, kept in the log."""

from __future__ import annotations

import hashlib
import uuid

import orjson

from events.catalog import CATALOG
from events.envelope import CloudEvent
from events.payloads import SandboxState
from services.consumers.scoring.check_inputs import FinalState, RecordValue, SharedValues, Written
from services.consumers.scoring.constraints import aware

SOURCE = "/rounds/scoring"
MAX_BYTES = 200 * 1024  # inside the 256 KiB event limit; a larger state is not recorded (re-read it instead)
_NAMESPACE = uuid.UUID("0b7a3f3e-54a9-5c2e-9a61-8d4f2b7c1e55")


def to_event(session_id: str, state: FinalState, time: str | None) -> CloudEvent | None:
    payload = SandboxState.model_validate({
        "writes": [{"resource_type": w.resource_type, "id": w.id, "version_id": w.version,
                    "deleted": w.deleted, "method": w.method, "resource": w.resource} for w in state.writes],
        "record_values": [{"code": v.code, "value": v.value, "unit": v.unit, "time": v.time,
                           "reference": v.reference} for v in state.record_values],
    })
    body = orjson.dumps(payload.to_data(), option=orjson.OPT_SORT_KEYS)
    if len(body) > MAX_BYTES:
        return None
    digest = hashlib.sha256(body).hexdigest()
    return CATALOG.make(payload, source=SOURCE, subject=session_id,
                        id=uuid.uuid5(_NAMESPACE, f"{session_id}|{digest}").hex, time=time)


def from_data(data: dict) -> FinalState:
    """The final state a `rounds.sandbox.state` payload holds (validated here)."""
    return from_payload(SandboxState.model_validate(data))


def from_event(event: CloudEvent) -> FinalState:
    """The final state of a `rounds.sandbox.state` event read from the log: its payload as the catalog
    validated it when decoding the event (not validated a second time).

    The record's values are the same in the states of every session on one patient (the shared record's
    results), and validating the same JSON gives the same list (events/payloads/sandbox.py): states holding
    one list share one SharedValues, whose derived forms the checks compute once."""
    state: SandboxState = CATALOG.payload(event)  # type: ignore[assignment]
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
