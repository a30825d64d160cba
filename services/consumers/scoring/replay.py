"""A session's final writes rebuilt from its log, for a session whose log holds no `rounds.sandbox.state` (a
log recorded before every state was kept, or one whose stored state did not travel with it).

As τ²-bench rebuilds its environment from the trajectory, the sandbox is rebuilt from the session's logged
writes: every successful `rounds.ehr.request`/`.response` pair of POST, PUT, PATCH or DELETE on the session
base, in log order. Each write's outcome is what the FHIR server answered at the session's clock (the
response body: the resource as stored, with its id and `meta.versionId`; a transaction or batch Bundle's
entries, matched to its request entries), so applying them in order gives the current version of every
resource the session wrote, deletions as tombstones: what `GET /sessions/<id>/writes` returns. Bodies too
large for their event are read from `event_blobs` (`body_refs` -> `events.blobs.read`).

Nothing is hidden: a write whose outcome the log does not show (a response without a body, `Prefer:
return=minimal`; a conditional delete) is listed in `Replayed.gaps`, and `disagreements` compares a replay
with a recorded state (tests/consumers/scoring/test_replay.py; benchmarks/README.md gives the figures on the
demo).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from contracts.trajectory import WRITE_METHODS, Trajectory
from contracts.trajectory_log import LoggedEvent, build_trajectory
from events.payloads import EhrRequest, EhrResponse, SandboxState
from services.consumers.scoring import snapshot
from services.consumers.scoring.check_inputs import FinalState, Written

BUNDLE_WRITES = frozenset({"batch", "transaction"})


@dataclass
class Replayed:
    """The session's writes, current version of each resource in write order, and what could not be
    rebuilt ("METHOD url: why")."""

    writes: list[Written] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)


def body_refs(events: Iterable[Any]) -> set[str]:
    """Blob references of the EHR bodies among `events` (LoggedEvent-like) that a replay reads."""
    return {ref for e in events if e.type in (EhrRequest.TYPE, EhrResponse.TYPE)
            and (ref := _PAYLOAD[e.type].model_validate(e.data or {}).body_ref)}


_PAYLOAD: dict[str, type[EhrRequest] | type[EhrResponse]] = {EhrRequest.TYPE: EhrRequest,
                                                             EhrResponse.TYPE: EhrResponse}


def _json(text: str | None) -> Any:
    """The JSON of a body as the trajectory holds it; None when absent or not JSON."""
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def _target(url: str) -> tuple[str, ...] | None:
    """(type,) or (type, id) of a write's URL relative to the base; () for the base itself (a Bundle);
    None for operations and searches (`$op`, `_search`), which write nothing."""
    parts = tuple(p for p in url.split("?", 1)[0].strip("/").split("/") if p)
    if any(p.startswith("$") or p == "_search" for p in parts) or len(parts) > 2:
        return None
    return parts


def _version(resource: Mapping[str, Any]) -> int:
    meta = resource.get("meta")
    version = meta.get("versionId") if isinstance(meta, dict) else None
    return int(version) if str(version or "").isdigit() else 0


class _Sandbox:
    """The session's writes as applied so far, by (type, id); a rewrite moves a resource to the end."""

    def __init__(self) -> None:
        self.current: dict[tuple[str, str], Written] = {}
        self.gaps: list[str] = []

    def put(self, method: str, resource: Any) -> bool:
        if not isinstance(resource, dict) or not resource.get("resourceType") or not resource.get("id"):
            return False
        key = (resource["resourceType"], str(resource["id"]))
        self.current.pop(key, None)
        self.current[key] = Written(key[0], key[1], _version(resource), False, method, resource)
        return True

    def delete(self, resource_type: str, resource_id: str) -> None:
        key = (resource_type, resource_id)
        before = self.current.pop(key, None)
        version = before.version + 1 if before is not None and before.version else 0  # 0: not known here
        self.current[key] = Written(resource_type, resource_id, version, True, "DELETE", None)

    def apply(self, method: str, url: str, request: Any, response: Any) -> None:
        target = _target(url)
        if target is None:
            return
        if method == "DELETE":
            if len(target) == 2:
                self.delete(*target)
            else:
                self.gaps.append(f"DELETE {url}: a conditional delete names no resource")
        elif target == () and isinstance(request, dict) and request.get("type") in BUNDLE_WRITES:
            self._bundle(url, request, response)
        elif not self.put(method, response):
            self.gaps.append(f"{method} {url}: the response carries no resource")

    def _bundle(self, url: str, request: dict[str, Any], response: Any) -> None:
        if not isinstance(response, dict):
            self.gaps.append(f"POST {url or '/'}: the {request.get('type')} response is not in the log")
            return
        answers = response.get("entry") or []
        for index, entry in enumerate(request.get("entry") or ()):
            asked = (entry.get("request") or {}) if isinstance(entry, dict) else {}
            answer = answers[index] if index < len(answers) and isinstance(answers[index], dict) else {}
            status = str((answer.get("response") or {}).get("status") or "")
            method, entry_url = str(asked.get("method") or "").upper(), str(asked.get("url") or "")
            if method not in WRITE_METHODS or status[:1] != "2":
                continue
            target = _target(entry_url)
            if method == "DELETE" and target is not None and len(target) == 2:
                self.delete(*target)
            elif target is not None and not self.put(method, answer.get("resource")):
                self.gaps.append(f"{method} {entry_url} (in {url or '/'}): the response carries no resource")


def replay_trajectory(log: Trajectory) -> Replayed:
    """The writes of one session's trajectory, as the sandbox holds them at its end: its successful (2xx)
    write exchanges in log order, each applied with the request and response bodies the trajectory holds."""
    sandbox = _Sandbox()
    for call in log.ehr_calls():
        if call.is_write and call.status is not None and 200 <= call.status < 300:
            sandbox.apply(call.method, call.url, _json(call.request_body), _json(call.body))
    return Replayed(list(sandbox.current.values()), sandbox.gaps)


def replay_writes(events: Iterable[Any], stored: Mapping[str, bytes] | None = None) -> Replayed:
    """The writes of one session's events (LoggedEvent-like, in log order); `stored`: blob reference ->
    bytes for bodies kept in `event_blobs`."""
    return replay_trajectory(_trajectory(events, stored))


def _trajectory(events: Iterable[Any], stored: Mapping[str, bytes] | None) -> Trajectory:
    texts = {ref: body.decode(errors="replace") for ref, body in (stored or {}).items()}
    return build_trajectory("replay", [LoggedEvent(e.type, e.data or {}, e.time) for e in events], texts)


def replayed_state(events: Iterable[Any], stored: Mapping[str, bytes] | None = None,
                   record_values: Iterable[Any] = ()) -> tuple[FinalState, list[str]]:
    """The final state a replay rebuilds (with the shared record's values as the reader gives them: the
    record is not the session's to change) and its gaps."""
    replayed = replay_writes(events, stored)
    return FinalState(writes=replayed.writes, record_values=list(record_values)), replayed.gaps


def replayed_state_of(log: Trajectory, record_values: Iterable[Any] = ()) -> tuple[FinalState, list[str]]:
    """`replayed_state` of a trajectory already built (its bodies already read)."""
    replayed = replay_trajectory(log)
    return FinalState(writes=replayed.writes, record_values=list(record_values)), replayed.gaps


def state_of_log(events: Iterable[Any], stored: Mapping[str, bytes] | None = None,
                 record_values: Iterable[Any] = ()) -> FinalState:
    """The final state a session's log gives: its last recorded `rounds.sandbox.state` (inline, or stored in
    `stored`), else its replayed writes with `record_values`."""
    events = list(events)
    recorded = [e.data for e in events if e.type == SandboxState.TYPE]
    last = SandboxState.model_validate(recorded[-1]) if recorded else None
    state = snapshot.from_payload_stored(last, stored) if last is not None else None
    return state if state is not None else replayed_state(events, stored, record_values)[0]


def disagreements(recorded: FinalState, replayed: Iterable[Written]) -> list[str]:
    """Where a replay differs from the state recorded for the same session ("Type/id: what"): a resource
    only one holds, deleted in one only, another version (when the replay knows it), another content."""
    theirs = {(w.resource_type, w.id): w for w in recorded.writes}
    ours = {(w.resource_type, w.id): w for w in replayed}
    out = [f"{t}/{i}: recorded, not replayed" for t, i in sorted(theirs.keys() - ours.keys())]
    out += [f"{t}/{i}: replayed, not recorded" for t, i in sorted(ours.keys() - theirs.keys())]
    for key in sorted(theirs.keys() & ours.keys()):
        a, b = theirs[key], ours[key]
        name = f"{key[0]}/{key[1]}"
        if a.deleted != b.deleted:
            out.append(f"{name}: deleted {a.deleted} recorded, {b.deleted} replayed")
        elif b.version and a.version != b.version:
            out.append(f"{name}: version {a.version} recorded, {b.version} replayed")
        elif not a.deleted and a.resource != b.resource:
            out.append(f"{name}: another content")
    return out
