"""A connector's HL7 v2 message read into FHIR: ORU^R01 results as Observations, ADT^A01/A04 as a new
Encounter, A02/A03 as changes to it (data/v2.json `inbound` says what is accepted and how identifiers find
the record). Pure: the listener (listener.py) resolves the patient and the visit and makes the writes.

A message that is not HL7 v2 or is of a kind Rounds does not take is `Rejected` with AR (the sender should
not resend it unchanged); one whose content cannot be written (an unknown patient, a value that is not a
number) with AE; both carry the reason the ACK states.
"""

from __future__ import annotations

from dataclasses import dataclass

from hl7apy.consts import VALIDATION_LEVEL
from hl7apy.core import Message, Segment
from hl7apy.parser import parse_message

from services.fhir_api.hl7.er7 import from_ts, tables, unescape


class Rejected(Exception):
    """The message is not accepted: `code` AR (reject) or AE (error), `reason` for MSA-3/ERR-8."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code, self.reason = code, reason


@dataclass(frozen=True)
class Inbound:
    """A parsed message: who it is about and what it says."""

    message: Message
    control: str
    trigger: str
    patient_identifier: str  # PID-3.1
    visit: str  # PV1-19.1 ('' when absent)

    def segments(self, name: str) -> list[Segment]:
        return [s for s in self.message.children if s.name == name]


def _text(node) -> str:
    return unescape(node.to_er7()) if node is not None else ""


def _first(node) -> str:
    """The first component of a field as text."""
    return _text(node).split("^", 1)[0]


def read(text: str) -> Inbound:
    """Parse and check a message (Rejected AR when it cannot be taken at all)."""
    try:
        message = parse_message(text.replace("\n", "\r").strip("\r"), find_groups=False,
                                validation_level=VALIDATION_LEVEL.TOLERANT)
    except Exception as exc:  # noqa: BLE001 - hl7apy raises many classes for unreadable input
        raise Rejected("AR", f"not an HL7 v2 message: {exc}") from exc
    msh = message.msh
    kind, trigger = _first(msh.msh_9), _text(msh.msh_9).split("^")[1:2]
    trigger = trigger[0] if trigger else ""
    control = _text(msh.msh_10)
    accepted = tables()["inbound"]["triggers"]
    if not control:
        raise Rejected("AR", "MSH-10 (message control id) is empty")
    if accepted.get(trigger) != kind:
        raise Rejected("AR", f"{kind}^{trigger} is not taken (ORU^R01, ADT^A01/A02/A03/A04)")
    if not _text(msh.msh_12).startswith("2."):
        raise Rejected("AR", f"version {_text(msh.msh_12)!r} is not HL7 v2")
    pids = [s for s in message.children if s.name == "PID"]
    if not pids or not _first(pids[0].pid_3):
        raise Rejected("AE", "PID-3 (patient identifier) is required")
    pv1s = [s for s in message.children if s.name == "PV1"]
    visit = _first(pv1s[0].pv1_19) if pv1s else ""
    return Inbound(message, control, trigger, _first(pids[0].pid_3), visit)


def _when(value: str, field: str) -> str | None:
    if not value:
        return None
    try:
        return from_ts(value)
    except ValueError as exc:
        raise Rejected("AE", f"{field}: {exc}") from exc


def _concept(field_text: str) -> dict:
    systems = tables()["inbound"]["coding_systems"]
    parts = field_text.split("^")
    codings = []
    for at in (0, 3):
        code, display, system = (parts[at:at + 3] + ["", "", ""])[:3]
        if code:
            coding = {"system": systems.get(system, f"urn:hl7v2:{system or 'local'}"), "code": code}
            codings.append({**coding, "display": display} if display else coding)
    if not codings:
        raise Rejected("AE", "OBX-3 (observation identifier) is empty")
    return {"coding": codings, "text": parts[1] if len(parts) > 1 and parts[1] else codings[0]["code"]}


def _reference_range(text: str) -> list[dict]:
    low, sep, high = text.partition("-")
    try:
        if sep and low and high:
            return [{"low": {"value": float(low)}, "high": {"value": float(high)}}]
    except ValueError:
        pass
    return [{"text": text}] if text else []


def observations(inbound: Inbound, patient: str, encounter: str | None) -> list[dict]:
    """One Observation per OBX of an ORU^R01, identified by (MSH-10, OBX-1)."""
    t = tables()
    obr = next(iter(inbound.segments("OBR")), None)
    found = []
    for index, obx in enumerate(inbound.segments("OBX"), start=1):
        set_id = _text(obx.obx_1) or str(index)
        kind, raw = _text(obx.obx_2), _text(obx.obx_5)
        status = t["inbound_status"].get(_text(obx.obx_11), "final")
        obs: dict = {"resourceType": "Observation", "status": status,
                     "identifier": [{"system": t["inbound"]["control_system"],
                                     "value": f"{inbound.control}/{set_id}"}],
                     "category": [{"coding": [{"system": "http://terminology.hl7.org/CodeSystem/"
                                                         "observation-category", "code": "laboratory"}]}],
                     "code": _concept(_text(obx.obx_3)), "subject": {"reference": patient}}
        if encounter:
            obs["encounter"] = {"reference": encounter}
        if kind in ("NM", "SN"):
            try:
                obs["valueQuantity"] = {"value": float(raw)}
            except ValueError as exc:
                raise Rejected("AE", f"OBX-5 {raw!r} is not a number (OBX-2 {kind})") from exc
            if (unit := _first(obx.obx_6)):
                obs["valueQuantity"]["unit"] = unit
        elif raw:
            obs["valueString"] = raw.replace("~", "")
        effective = _when(_text(obx.obx_14), "OBX-14") or (_when(_text(obr.obr_7), "OBR-7") if obr else None)
        if effective:
            obs["effectiveDateTime"] = effective
        issued = _when(_text(obx.obx_19), "OBX-19") or (_when(_text(obr.obr_22), "OBR-22") if obr else None)
        if issued and "T" in issued:
            obs["issued"] = issued
        if (ranges := _reference_range(_text(obx.obx_7))):
            obs["referenceRange"] = ranges
        if (flag := _text(obx.obx_8)):
            obs["interpretation"] = [{"coding": [{"system": t["inbound"]["interpretation_system"],
                                                  "code": flag}]}]
        found.append(obs)
    if not found:
        raise Rejected("AE", "an ORU^R01 without OBX segments has no result")
    return found


def _location(inbound: Inbound) -> dict | None:
    pv1 = next(iter(inbound.segments("PV1")), None)
    place = _text(pv1.pv1_3).split("^") if pv1 is not None else []
    name = (place[8] if len(place) > 8 and place[8] else place[0]) if place else ""
    return {"location": {"display": name}} if name else None


def _occurred(inbound: Inbound) -> str | None:
    evn = next(iter(inbound.segments("EVN")), None)
    return _when(_text(evn.evn_6) or _text(evn.evn_2), "EVN-6") if evn is not None else None


def admitted(inbound: Inbound, patient: str) -> dict:
    """The Encounter an A01/A04 opens (identified by PV1-19)."""
    t = tables()
    if not inbound.visit:
        raise Rejected("AE", "PV1-19 (visit number) is required")
    pv1 = inbound.segments("PV1")[0]
    classes = t["inbound"]["patient_class"]
    start = _when(_text(pv1.pv1_44), "PV1-44") or _occurred(inbound)
    encounter: dict = {"resourceType": "Encounter", "status": "in-progress",
                       "identifier": [{"system": t["visit_identifier"]["system"], "value": inbound.visit}],
                       "class": {"system": classes["_system"], "code": classes.get(_text(pv1.pv1_2), "IMP")},
                       "subject": {"reference": patient}}
    if start:
        encounter["period"] = {"start": start}
    if (where := _location(inbound)) is not None:
        encounter["location"] = [{**where, **({"period": {"start": start}} if start else {})}]
    return encounter


def changed(inbound: Inbound, encounter: dict) -> dict:
    """The Encounter after an A02 (a new location, once) or an A03 (finished at PV1-45 / EVN-6)."""
    updated = dict(encounter)
    when = _occurred(inbound)
    if inbound.trigger == "A02":
        where = _location(inbound)
        if where is None:
            raise Rejected("AE", "PV1-3 (the new location) is required for A02")
        entry = {**where, **({"period": {"start": when}} if when else {})}
        locations = list(updated.get("location") or ())
        if entry not in locations:
            updated["location"] = locations + [entry]
        return updated
    pv1 = inbound.segments("PV1")[0]
    end = _when(_text(pv1.pv1_45), "PV1-45") or when
    updated["status"] = "finished"
    if end:
        updated["period"] = {**(updated.get("period") or {}), "end": end}
    return updated
