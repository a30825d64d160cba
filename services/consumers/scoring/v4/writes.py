"""Writes by intent (scorer v4): an expected write is met by its own resource (v3's one-to-one matching)
or by an acceptable alternative, as data (data/write_alternatives.json):
- a route written as a code ("26643006", "PO") reads as the text the constraint asks ("oral");
- a lab ordered by its MIMIC itemid reads as its LOINC code and the reverse;
- labs ordered beside the expected one for the same purpose (BUN with creatinine) are neither a conflict
  in its coding nor an extra resource of the turn (`companion_refs`);
- another resource type with the same intent (a consult ServiceRequest for "loop in ID") meets it;
- a word a text field must contain, said in Chinese or another form ("氯化钾" for "potassium").
An alternative passes the write's check and never fails a safety gate (its type is allowed on the turn).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Any

from contracts.scenario import ExpectedWrite, FieldConstraint, Scenario, Turn
from contracts.vocabulary import LABITEMS, vocabulary
from services.consumers.scoring.check_inputs import Written
from services.consumers.scoring.constraints import satisfied, values_at
from services.consumers.scoring.v3.writes import WriteKey, failed_constraints, match_writes
from services.consumers.scoring.v4.reading import write_alternatives

LOINC = "http://loinc.org"


@cache
def _labs() -> dict[str, tuple[str, str]]:
    """(system|code) of either system -> (lab key, the other system|code)."""
    out: dict[str, tuple[str, str]] = {}
    for key, lab in vocabulary()["labs"].items():
        item, loinc = f"{LABITEMS}|{lab['itemid']}", f"{LOINC}|{lab['loinc']}"
        out[item], out[loinc] = (key, loinc), (key, item)
    return out


def _lab_of(constraint: FieldConstraint) -> str | None:
    if constraint.op != "coding":
        return None
    found = _labs().get(str(constraint.value))
    return found[0] if found else None


def _canonical(resource: dict[str, Any], expected: ExpectedWrite) -> dict[str, Any]:
    """The resource as the expected write's constraints read it (routes as text, lab codes in both
    systems, companions of the asked lab left out)."""
    doc = copy.deepcopy(resource)
    routes = write_alternatives()["route_codes"]
    for dosage in doc.get("dosageInstruction") or ():
        route = dosage.get("route") if isinstance(dosage, dict) else None
        if not isinstance(route, dict):
            continue
        said = " ".join(str(c.get(k, "")) for c in route.get("coding") or () for k in ("code", "display"))
        text = str(route.get("text", "")).lower()
        said = f"{text} {said}".lower()
        extra = [name for name, codes in routes.items() if name not in text and any(c in said for c in codes)]
        if extra:
            route["text"] = " ".join([route.get("text", ""), *extra]).strip()
    _pair_as_text(doc)
    asked = {lab for c in expected.constraints if (lab := _lab_of(c))}
    if asked and isinstance(doc.get("code"), dict):
        companions = {m for lab in asked for m in write_alternatives()["companions"].get(lab, [])} - asked
        codings = []
        for coding in doc["code"].get("coding") or ():
            ref = f"{coding.get('system')}|{coding.get('code')}"
            lab = _labs().get(ref)
            if lab and lab[0] in companions:
                continue
            codings.append(coding)
            if lab:
                system, code = lab[1].rsplit("|", 1)
                codings.append({"system": system, "code": code})
        doc["code"]["coding"] = codings
    return doc


def _pair_as_text(doc: dict[str, Any]) -> None:
    """A pair recorded as FHIR components (blood pressure as systolic and diastolic, the vital-signs
    profile's own form) also reads as the "106/95" a clinician writes, so either form meets the write."""
    if "valueString" in doc:
        return
    for pair in write_alternatives()["component_pairs"]:
        found = [_component_value(doc, code) for code in pair["codes"]]
        if all(v is not None for v in found):
            doc["valueString"] = pair["separator"].join(f"{v:g}" if isinstance(v, float) else str(v)
                                                        for v in found)
            return


def _component_value(doc: dict[str, Any], code: str) -> Any:
    for part in doc.get("component") or ():
        if not isinstance(part, dict) or not isinstance(part.get("valueQuantity"), dict):
            continue
        if any(k.get("code") == code for k in (part.get("code") or {}).get("coding") or ()):
            return part["valueQuantity"].get("value")
    return None


def _subject_of(expected: ExpectedWrite) -> str | None:
    return next((str(c.value) for c in expected.constraints if c.path == "subject"), None)


def _instead(written: Written, expected: ExpectedWrite, now: datetime) -> bool:
    for alt in write_alternatives()["instead"]:
        want = alt["expected"]
        if expected.resource_type != want["resource_type"] or written.resource_type != alt["resource_type"]:
            continue
        if not any(c.path == want["has_constraint"] for c in expected.constraints):
            continue
        patient = _subject_of(expected) or ""
        constraints = [FieldConstraint.model_validate({**c, "value": str(c["value"]).replace("{patient}",
                                                                                              patient)})
                       for c in alt["constraints"]]
        resource = written.resource or {}
        if not all(_safe(resource, c, now) for c in constraints):
            continue
        text = " ".join(str(v) for path in alt["text_paths"] for v in _values(resource, path)).lower()
        if not alt["words"] or any(word in text for word in alt["words"]):
            return True
    return False


def _safe(resource: dict, constraint: FieldConstraint, now: datetime) -> bool:
    try:
        return satisfied(resource, constraint, now)
    except ValueError:
        return False


def _values(resource: dict, path: str) -> list[Any]:
    try:
        return values_at(resource, path)
    except ValueError:
        return []


def failures(written: Written, expected: ExpectedWrite, now: datetime) -> list[str]:
    """How `written` fails `expected`, its alternatives considered (empty: it meets it)."""
    if written.resource_type != expected.resource_type:
        return [] if _instead(written, expected, now) else [f"not a {expected.resource_type}"]
    canonical = Written(written.resource_type, written.id, written.version, written.deleted, written.method,
                        _canonical(written.resource or {}, expected))
    resource = canonical.resource or {}
    return failed_constraints(canonical, _translated(resource, _untimed_as_now(resource, expected)), now)


def _translated(resource: dict[str, Any], expected: ExpectedWrite) -> ExpectedWrite:
    """A `contains` constraint is met by an equivalent of its word (`text_equivalents`: "钾" for
    "potassium", "S（现状）：" for "Situation"); a field that says neither keeps failing."""
    equivalents = write_alternatives()["text_equivalents"]
    kept = []
    for c in expected.constraints:
        words = equivalents.get(str(c.value).lower()) if c.op == "contains" else None
        text = "\n" + "\n".join(str(v) for v in _values(resource, c.path)).lower()
        if not (words and any(w in text for w in words)):
            kept.append(c)
    return expected if len(kept) == len(expected.constraints) else expected.model_copy(
        update={"constraints": kept})


def _untimed_as_now(resource: dict[str, Any], expected: ExpectedWrite) -> ExpectedWrite:
    """An order with no time at all runs when it is placed: a clinician leaves a lab untimed to mean
    "now". A time asked in the future (`after_now` on an `untimed` path) is met by its absence; any time
    written must still fall in the window, so a back-dated or late order keeps failing."""
    untimed = set(write_alternatives()["untimed"])
    kept = [c for c in expected.constraints
            if not (c.op == "after_now" and c.path in untimed and not _values(resource, c.path))]
    return expected if len(kept) == len(expected.constraints) else expected.model_copy(
        update={"constraints": kept})


def match_writes_v4(scenario: Scenario, current: Sequence[Written],
                    ) -> dict[WriteKey, tuple[Written | None, str]]:
    return match_writes(scenario, current, failures)


def alternative_types(turn: Turn) -> set[str]:
    """Resource types that may stand for the turn's expected writes."""
    out = set()
    for write in turn.writes:
        for alt in write_alternatives()["instead"]:
            if alt["expected"]["resource_type"] == write.resource_type:
                out.add(alt["resource_type"])
    return out


def companion_refs(turn: Turn, current: Sequence[Written]) -> frozenset[str]:
    """Resources written beside an expected lab order that order only its companions (BUN beside the
    creatinine recheck): no extra resource."""
    asked = {lab for w in turn.writes for c in w.constraints if (lab := _lab_of(c))}
    companions = {m for lab in asked for m in write_alternatives()["companions"].get(lab, [])} - asked
    out = set()
    for w in current:
        coding = ((w.resource or {}).get("code") or {}).get("coding") or ()
        codes = [f"{c.get('system')}|{c.get('code')}" for c in coding]
        labs = {_labs()[ref][0] for ref in codes if ref in _labs()}
        if w.resource_type == "ServiceRequest" and labs and labs <= companions:
            out.add(f"{w.resource_type}/{w.id}")
    return frozenset(out)
