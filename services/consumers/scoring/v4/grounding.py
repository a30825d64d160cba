"""Grounding (scorer v4): nothing passes on what never reached the assistant. A fact, a conclusion, a write or
a mention passes only when the record it rests on (data/grounding.json `rests_on`, per rubric kind: the item's
fact, the turn's facts, the session's) was received, before the answer, WITH its content — not just its ids.
The server keeps an id, a status and a code in any subset (`_elements=id`), so a resource a search cut down
(tagged SUBSETTED) counts only when it kept what its type records (`subset_keeps`: a result's value, a
patient's identifiers, an order's dosage).

A fact is grounded on the result the answer states: a claim with the time it was drawn written beside it
("3.1 mEq/L (2140-06-18 09:35)") states the result drawn then, so when that is not the fact's source (the same
number drawn at another time: the latest potassium given for the one before the dose), reading the source
elsewhere does not ground the fact (`stated_by`).

The bodies are the `rounds.ehr.response` events' (inline, or the stored copy their `bodyRef` names:
contracts/trajectory_log.py). A response whose body the log does not hold (a log loaded without its stored
bodies) is read by the ids it recorded, as scorer v3 did, and the evidence says so; one that holds neither
(its blobs did not travel with the log) cannot be judged, and an item it might have grounded is not held to
it.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import orjson

from contracts.scenario import Fact, Turn
from contracts.trajectory import EhrCall, Trajectory, TrajectoryTurn
from services.consumers.scoring.check_inputs import CheckResult, RecordValue
from services.consumers.scoring.units import analyte_of
from services.consumers.scoring.v4.claim_model import ResultClaim
from services.consumers.scoring.v4.tokens import Spans
from services.consumers.scoring.v4.verify import matches

_BARE = frozenset({"resourceType", "id", "meta"})
_CLOCK = re.compile(r"(\d{1,2}):(\d{2})|(\d{1,2})\s*(?:点|时|[ap]\.?m)(?:(\d{1,2})分)?")


@cache
def _data() -> dict[str, Any]:
    return json.loads((Path(__file__).with_name("data") / "grounding.json").read_text(encoding="utf-8"))


def _named(key: str, names: list[str]) -> bool:
    """Is a JSON key one of the element names (`value[x]` covers valueQuantity, valueString ...)?"""
    return any(key == n or (n.endswith("[x]") and key.startswith(n[:-3]) and key[len(n) - 3:][:1].isupper())
               for n in names)


def _kept(resource: dict) -> bool:
    """Did the resource reach the assistant with its content (see the module)?"""
    keys = set(resource) - _BARE
    tags = (resource.get("meta") or {}).get("tag") or []
    if not any(isinstance(t, dict) and t.get("code") == _data()["subset_tag"] for t in tags):
        return bool(keys)
    keeps = _data()["subset_keeps"].get(resource.get("resourceType"))
    if keeps is None:
        return bool(keys - set(_data()["subset_bare"]))
    return any(_named(k, keeps) for k in keys)


@lru_cache(maxsize=512)
def read_resources(body: str) -> frozenset[str] | None:
    """"Type/id" of every resource a response body gave with its content (None: not a FHIR JSON body this
    reader knows)."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict) or "resourceType" not in doc:
        return None
    found = [e.get("resource") for e in doc.get("entry") or () if isinstance(e, dict)] \
        if doc.get("resourceType") == "Bundle" else [doc]
    return frozenset(f"{r.get('resourceType')}/{r.get('id')}" for r in found
                     if isinstance(r, dict) and _kept(r))


def _given(call: EhrCall) -> tuple[set[str], bool]:
    """What a call gave with content, and whether that was read off its body (False: ids only)."""
    read = read_resources(call.body) if call.body is not None else None
    if read is not None:
        return set(read), True
    return set(call.resources or ()), False


@dataclass(frozen=True)
class Received:
    """What reached the assistant before an answer: each resource's first event, and how it was known."""

    seen: dict[str, int]
    ids_only: bool  # some response was known only by its recorded ids (the log holds no body)
    unknown: bool  # some response is known neither by body nor by ids (its blobs did not travel)


def received(log: Trajectory, turn_log: TrajectoryTurn) -> Received | None:
    """None when the log records no responses at all (a synthetic log: not held to grounding)."""
    calls = [c for t in log.turns.values() for c in t.ehr]
    if not any(c.resources is not None or c.body is not None for c in calls):
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
                unknown = True
                continue
            given, from_body = _given(call)
            ids_only |= not from_body and bool(given)
            for ref in given:
                seen.setdefault(ref, call.position)
    return Received(seen, ids_only, unknown)


def grounded_refs(refs: list[str], need: str, log: Trajectory,
                  turn_log: TrajectoryTurn) -> CheckResult | None:
    """Were `all` (or `any`) of `refs` received with their content? None: not held to it."""
    got = received(log, turn_log) if refs else None
    if got is None:
        return None
    missing = [r for r in refs if r not in got.seen]
    if need == "any" and len(missing) < len(refs):
        missing = []
    if missing and got.unknown:
        return None  # what those responses gave is not in this log: not held to it
    if missing:
        return CheckResult(False, f"not grounded: {', '.join(missing[:3])} never reached the assistant "
                                  "with its content")
    note = " (ids only: the log holds no body)" if got.ids_only else ""
    return CheckResult(True, f"grounded in event #{max(got.seen[r] for r in refs if r in got.seen)}{note}")


def grounded(fact: Fact, log: Trajectory, turn_log: TrajectoryTurn,
             stated: set[str] | None = None) -> CheckResult | None:
    """A fact's grounding. `stated`: the results the claims meeting it state (None: they do not narrow it);
    a fact whose claims state none of its sources is not grounded by reading them."""
    if stated and not stated & set(fact.sources):
        return CheckResult(False, f"not grounded: the answer states {', '.join(sorted(stated)[:2])}, not "
                                  f"{', '.join(fact.sources[:2])} (the same value drawn at another time)")
    return grounded_refs(fact.sources, "all", log, turn_log)


def rests_on(kind: str, fact: Fact | None, turn: Turn, earlier: list[Turn], log: Trajectory,
             turn_log: TrajectoryTurn) -> CheckResult | None:
    """The grounding of an item of `kind` (its `fact` for fact_cited; `earlier`: the session's turns before
    this one): the first rule of `rests_on` whose facts have sources. None: not held to it."""
    for rule in _data()["rests_on"].get(kind, []):
        facts = {"item": [fact] if fact is not None else [], "turn": turn.facts,
                 "session": [f for t in [*earlier, turn] for f in t.facts]}[rule["facts"]]
        refs = list(dict.fromkeys(r for f in facts for r in f.sources))
        if refs:
            return grounded_refs(refs, rule["need"], log, turn_log)
    return None


def written_times(norm: str, spans: Spans, start: int, end: int) -> frozenset[tuple[int, int]]:
    """The times of day written right after a claim (`start`: where it ends; `end`: where the next one
    starts), in a date ("2140-06-18 09:35") or on their own ("17:42", "5:42 pm", "下午5点42分")."""
    table = _data()["time_written"]
    i = bisect_right(spans.starts, start - 1)
    limit = min(end, start + table["window"])
    out = set()
    while i < len(spans.spans) and spans.spans[i].start < limit:
        span = spans.spans[i]
        i += 1
        m = _CLOCK.search(norm[span.start:span.end]) if span.kind in ("date", "time") else None
        if m is None:
            continue
        hour, minute = int(m.group(1) or m.group(3)), int(m.group(2) or m.group(4) or 0)
        if hour < 12 and any(cue in norm[span.start:span.end] for cue in table["afternoon"]):
            hour += 12
        out.add((hour, minute))
    return frozenset(out)


def stated_by(claim: ResultClaim, values: list[RecordValue],
              times: frozenset[tuple[int, int]]) -> set[str] | None:
    """The results a true claim states when the times written beside it single them out: those of its value
    drawn at one of those times of day (on its written day, if any). None: no time, or no result of this value
    then (it does not narrow the fact)."""
    found = {v.reference for v in values if v.time is not None and (v.time.hour, v.time.minute) in times
             and (claim.month_day is None or (v.time.month, v.time.day) == claim.month_day)
             and matches(claim, v.value, v.unit, analyte_of(v.code, None))}
    return found or None
