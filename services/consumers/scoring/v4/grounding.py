"""Grounding (scorer v4): a fact is grounded only when a response the assistant received, before its answer,
carried the fact's resources WITH their content — not just their ids. A search with `_elements=id` (or
`_summary=count`) returns ids and grounds nothing.

The bodies are the `rounds.ehr.response` events' (inline, or the stored copy their `bodyRef` names:
session_log.py). A response whose body the log does not hold (a log loaded without its stored bodies) is
read by the ids it recorded, as scorer v3 did, and the evidence says so; one that holds neither (its blobs
did not travel with the log) cannot be judged, and a fact it might have grounded is not held to it.
"""

from __future__ import annotations

from functools import lru_cache

import orjson

from contracts.scenario import Fact
from services.consumers.scoring.check_inputs import CheckResult, EhrCall, SessionLog, TurnLog

_BARE = frozenset({"resourceType", "id", "meta"})


@lru_cache(maxsize=512)
def read_resources(body: str) -> frozenset[str] | None:
    """"Type/id" of every resource a response body gave with content beyond its id (None: not a FHIR
    JSON body this reader knows)."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict) or "resourceType" not in doc:
        return None
    found = [e.get("resource") for e in doc.get("entry") or () if isinstance(e, dict)] \
        if doc.get("resourceType") == "Bundle" else [doc]
    return frozenset(f"{r.get('resourceType')}/{r.get('id')}" for r in found
                     if isinstance(r, dict) and set(r) - _BARE)


def _given(call: EhrCall) -> tuple[set[str], bool]:
    """What a call gave with content, and whether that was read off its body (False: ids only)."""
    read = read_resources(call.body) if call.body is not None else None
    if read is not None:
        return set(read), True
    return set(call.resources or ()), False


def grounded(fact: Fact, log: SessionLog, turn_log: TurnLog) -> CheckResult | None:
    """None when the fact has no sources or the log records no responses; else pass/fail with evidence."""
    refs = fact.sources
    calls = [c for t in log.turns.values() for c in t.ehr]
    if not refs or not any(c.resources is not None or c.body is not None for c in calls):
        return None
    limit = turn_log.answer_position if turn_log.answer_position is not None else float("inf")
    seen: dict[str, int] = {}
    ids_only = unknown = False
    for index in sorted(log.turns):
        if index > turn_log.index:
            break
        for call in log.turns[index].ehr:
            if call.position >= limit or not call.succeeded:
                continue
            if call.resources is None and (call.body is None or read_resources(call.body) is None):
                unknown = True  # a body and a list this store does not hold (a log loaded without its blobs)
                continue
            given, from_body = _given(call)
            ids_only |= not from_body and bool(given)
            for ref in given:
                seen.setdefault(ref, call.position)
    missing = [r for r in refs if r not in seen]
    if missing and unknown:
        return None  # what those responses gave is not in this log: not held to it
    if missing:
        return CheckResult(False, f"not grounded: {', '.join(missing[:3])} never reached the assistant "
                                  "with its value")
    note = " (ids only: the log holds no body)" if ids_only else ""
    return CheckResult(True, f"grounded in event #{max(seen[r] for r in refs)}{note}")
