"""replay.py on hand-made logs: writes applied in log order (create, update, delete, a transaction Bundle,
a body kept in the blob store), reads and failures ignored, gaps and disagreements reported, never hidden."""

from __future__ import annotations

import orjson

from contracts.trajectory_log import LoggedEvent, build_trajectory
from events.blobs import blob_ref
from services.consumers.scoring.check_inputs import FinalState, Written
from services.consumers.scoring.replay import body_refs, disagreements, replay_trajectory, replay_writes


def _med(rid: str, version: int, dose: float) -> dict:
    return {"resourceType": "MedicationRequest", "id": rid, "meta": {"versionId": str(version)},
            "status": "active", "dosageInstruction": [{"text": f"{dose} mg"}]}


class Log:
    def __init__(self) -> None:
        self.events: list[LoggedEvent] = []

    def call(self, method: str, url: str, status: int, request: object = None, response: object = None,
             **extra: object) -> None:
        rid = f"r{len(self.events)}"
        asked = {"requestId": rid, "method": method, "url": url}
        if request is not None:
            asked["body"] = orjson.dumps(request).decode()
        answered = {"requestId": rid, "status": status, "latencyMs": 1.0, **extra}
        if response is not None:
            answered["body"] = orjson.dumps(response).decode()
        self.events += [LoggedEvent("rounds.ehr.request", asked),
                        LoggedEvent("rounds.ehr.response", answered)]


def test_writes_are_applied_in_order_and_reads_and_failures_change_nothing() -> None:
    log = Log()
    log.call("GET", "MedicationRequest/a", 200, response=_med("a", 1, 1))
    log.call("POST", "MedicationRequest", 201, _med("x", 0, 5), _med("a", 1, 5))
    log.call("PUT", "MedicationRequest/a", 200, _med("a", 0, 2.5), _med("a", 2, 2.5))
    log.call("POST", "MedicationRequest", 422, _med("x", 0, 9), {"resourceType": "OperationOutcome"})
    log.call("POST", "Observation/_search", 200, response={"resourceType": "Bundle", "type": "searchset"})
    log.call("POST", "MedicationRequest", 201, _med("b", 0, 1), _med("b", 1, 1))
    log.call("DELETE", "MedicationRequest/b", 204)
    replayed = replay_writes(log.events)
    assert replayed.gaps == []
    assert [(w.id, w.version, w.deleted, w.method) for w in replayed.writes] == [
        ("a", 2, False, "PUT"), ("b", 2, True, "DELETE")]
    assert replayed.writes[0].resource["dosageInstruction"][0]["text"] == "2.5 mg"


def test_a_transaction_bundle_and_a_stored_body() -> None:
    request = {"resourceType": "Bundle", "type": "transaction", "entry": [
        {"resource": _med("t1", 0, 1), "request": {"method": "POST", "url": "MedicationRequest"}},
        {"request": {"method": "DELETE", "url": "Observation/o1"}},
        {"request": {"method": "GET", "url": "Patient/p"}},
    ]}
    response = orjson.dumps({"resourceType": "Bundle", "type": "transaction-response", "entry": [
        {"resource": _med("t1", 1, 1), "response": {"status": "201 Created"}},
        {"response": {"status": "204 No Content"}},
        {"resource": {"resourceType": "Patient", "id": "p"}, "response": {"status": "200 OK"}},
    ]})
    ref = blob_ref(response)
    log = Log()
    log.call("POST", "/", 200, request, bodyRef=ref, bodySize=len(response))  # the base, as recorded
    assert body_refs(log.events) == {ref}
    assert replay_writes(log.events).gaps == ["POST /: the transaction response is not in the log"]
    replayed = replay_writes(log.events, {ref: response})
    assert replayed.gaps == []
    assert [(w.resource_type, w.id, w.deleted) for w in replayed.writes] == [
        ("MedicationRequest", "t1", False), ("Observation", "o1", True)]


def test_what_a_log_cannot_show_is_a_gap_and_a_difference_is_reported() -> None:
    log = Log()
    log.call("POST", "MedicationRequest", 201, _med("x", 0, 5))  # Prefer: return=minimal
    log.call("DELETE", "MedicationRequest?status=draft", 204)
    assert replay_writes(log.events).gaps == [
        "POST MedicationRequest: the response carries no resource",
        "DELETE MedicationRequest?status=draft: a conditional delete names no resource"]

    recorded = FinalState(writes=[Written("MedicationRequest", "a", 2, False, "PUT", _med("a", 2, 2.5)),
                                  Written("MedicationRequest", "c", 1, False, "POST", _med("c", 1, 1))])
    same = [Written("MedicationRequest", "a", 2, False, "PUT", _med("a", 2, 2.5)),
            Written("MedicationRequest", "c", 1, False, "POST", _med("c", 1, 1))]
    assert disagreements(recorded, same) == []
    other = [Written("MedicationRequest", "a", 2, False, "PUT", _med("a", 2, 5)),
             Written("MedicationRequest", "d", 1, False, "POST", _med("d", 1, 1))]
    assert disagreements(recorded, other) == ["MedicationRequest/c: recorded, not replayed",
                                              "MedicationRequest/d: replayed, not recorded",
                                              "MedicationRequest/a: another content"]


def test_the_trajectory_carries_what_a_replay_applies() -> None:
    """A write's request body travels in its EhrCall (a read's does not), an exchange before any doctor
    message is kept in `ehr_before`, and `replay_trajectory` applies the write from the trajectory alone."""
    log = Log()
    log.call("GET", "MedicationRequest/a", 200, {"ignored": True}, _med("a", 1, 1))
    log.call("POST", "MedicationRequest", 201, _med("x", 0, 5), _med("x", 1, 5))
    trajectory = build_trajectory("s", log.events)
    read, write = trajectory.ehr_calls()
    assert trajectory.turns == {} and trajectory.ehr_before == [read, write]
    assert read.request_body is None and orjson.loads(write.request_body or "null") == _med("x", 0, 5)
    assert [(w.id, w.version) for w in replay_trajectory(trajectory).writes] == [("x", 1)]
