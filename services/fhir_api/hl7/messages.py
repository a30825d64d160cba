"""ER7 text of outbound ADT^A01/A02/A03/A04 and ORU^R01 v2.5.1 messages, built with hl7apy from the
session's FHIR resources (`model.Outbound`); every message is validated against the v2.5.1 structures before
it is sent, so a connector never receives one Rounds could not parse back.

Codes come from data/v2.json (patient class, sex, discharge disposition, abnormal flags, result status);
an observation is coded LOINC first where the record maps it, the MIMIC itemid (99MIMIC) as the alternate
or, without LOINC, as the identifier.
"""

from __future__ import annotations

from hl7apy.consts import VALIDATION_LEVEL
from hl7apy.core import Message

from services.fhir_api.hl7.er7 import clip, control_id, escape, tables, ts
from services.fhir_api.hl7.model import Location, Outbound

LOINC = "http://loinc.org"
MIMIC_PREFIX = "http://mimic.mit.edu/fhir/mimic/CodeSystem/"
# one ORU per result: its labevent_id is the filler order number (OBR-3), the specimen's order the placer's
LAB_IDENTIFIER = "http://mimic.mit.edu/fhir/mimic/identifier/observation-labevents"
SPECIMEN_IDENTIFIER = "http://mimic.mit.edu/fhir/mimic/identifier/specimen-lab"


class InvalidMessage(ValueError):
    """hl7apy refused the message Rounds built: a bug or a record value no v2.5.1 field can carry."""


def _header(trigger: str, control: str, sent: str) -> Message:
    t = tables()
    structure = t["structures"][trigger]
    message = Message(structure, version=t["version"], validation_level=VALIDATION_LEVEL.STRICT)
    kind = "ORU" if structure.startswith("ORU") else "ADT"
    msh = message.msh
    msh.msh_3, msh.msh_4 = t["sending"]["application"], escape(t["sending"]["facility"])
    msh.msh_5, msh.msh_6 = t["receiving"]["application"], escape(t["receiving"]["facility"])
    msh.msh_7 = sent
    msh.msh_9 = f"{kind}^{trigger}^{structure}"
    msh.msh_10 = control
    msh.msh_11 = t["processing_id"]
    msh.msh_12 = t["version"]
    return message


def _identifier(resource: dict | None, system: str) -> str:
    for ident in (resource or {}).get("identifier") or ():
        if ident.get("system") == system and ident.get("value"):
            return str(ident["value"])
    return (resource or {}).get("id", "")


def _fill_pid(pid, patient: dict) -> None:
    t = tables()
    rule = t["patient_identifier"]
    pid.pid_3 = f"{escape(_identifier(patient, rule['system']))}^^^{rule['authority']}^{rule['type']}"
    name = next(iter(patient.get("name") or ()), {})
    family = escape(name.get("family") or patient["id"])
    given = escape(" ".join(name.get("given") or ()))
    pid.pid_5 = f"{clip(family, 194)}^{clip(given, 30)}" if given else clip(family, 194)
    if patient.get("birthDate"):
        pid.pid_7 = ts(patient["birthDate"])
    pid.pid_8 = t["administrative_sex"].get(patient.get("gender", "unknown"), "U")


def _place(location: Location | None) -> str:
    if location is None:
        return ""
    name = location.name or location.id
    short = name[name.rfind("(") + 1:name.rfind(")")] if name.endswith(")") and "(" in name else name
    return f"{clip(escape(short), 20)}^^^^^^^^{clip(escape(name), 20)}^{clip(escape(location.id), 199)}"


def _fill_pv1(pv1, event: Outbound) -> None:
    t = tables()
    encounter = event.encounter or {}
    classes = t["patient_class"]
    code = (encounter.get("class") or {}).get("code", "")
    pv1.pv1_2 = classes["_registration"] if event.trigger == "A04" else classes.get(code, classes["_default"])
    if event.location is not None:
        pv1.pv1_3 = _place(event.location)
    if event.prior_location is not None:
        pv1.pv1_6 = _place(event.prior_location)
    visit = _identifier(encounter, t["visit_identifier"]["system"])
    if visit:
        pv1.pv1_19 = escape(visit)
    disposition = ((encounter.get("hospitalization") or {}).get("dischargeDisposition") or {})
    label = next((c.get("code") for c in disposition.get("coding") or ()), None)
    if event.trigger == "A03" and label in t["discharge_disposition"]:
        pv1.pv1_36 = t["discharge_disposition"][label]
    period = encounter.get("period") or {}
    if period.get("start") and event.trigger != "A04":
        pv1.pv1_44 = ts(period["start"])
    if period.get("end") and event.trigger == "A03":
        pv1.pv1_45 = ts(period["end"])


def build(stream: str, event: Outbound) -> tuple[str, str]:
    """(control id, ER7 text) of `event` in `stream` (a session); raises InvalidMessage when hl7apy does not
    validate it."""
    control = control_id(stream, event.key)
    sent = _sent(event)
    try:
        message = _oru(control, sent, event) if event.trigger == "R01" else _adt(control, sent, event)
        if not message.validate():
            raise InvalidMessage(f"{event.key}: not valid v2.5.1")
        return control, message.to_er7()
    except InvalidMessage:
        raise
    except Exception as exc:  # noqa: BLE001 - hl7apy's errors are many classes; all mean the same here
        raise InvalidMessage(f"{event.key}: {exc}") from exc


def _sent(event: Outbound) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(event.known_us / 1e6, UTC).strftime("%Y%m%d%H%M%S+0000")


def _adt(control: str, sent: str, event: Outbound) -> Message:
    message = _header(event.trigger, control, sent)
    message.evn.evn_1 = event.trigger
    message.evn.evn_2 = sent
    if event.occurred:
        message.evn.evn_6 = ts(event.occurred)
    _fill_pid(message.pid, event.patient)
    _fill_pv1(message.pv1, event)
    return message


def _coded(concept: dict) -> str:
    """CE of a CodeableConcept: LOINC (LN) first where mapped, the MIMIC code (99MIMIC) as the alternate."""
    t = tables()
    codings = concept.get("coding") or ()
    loinc = next((c for c in codings if c.get("system") == LOINC), None)
    local = next((c for c in codings if str(c.get("system", "")).startswith(MIMIC_PREFIX)), None)
    parts = []
    for coding, system in ((loinc, t["loinc_system"]), (local, t["mimic_system"])):
        if coding is not None:
            parts.append(f"{clip(escape(coding['code']), 20)}^{clip(escape(coding.get('display', '')), 199)}"
                         f"^{system}")
    if not parts:
        parts.append(f"^{clip(escape(concept.get('text', '')), 199)}")
    return "^".join(parts[:2])


def _lines(text: str, length: int) -> list[str]:
    """Long text as repetitions of at most `length` characters (hl7apy types OBX-5 as ST), never splitting an
    escape sequence."""
    out = []
    while text:
        piece = clip(text, length)
        out.append(piece)
        text = text[len(piece):]
    return out


def _range(observation: dict) -> str:
    ranges = observation.get("referenceRange") or ()
    if not ranges:
        return ""
    low, high = (ranges[0].get("low") or {}).get("value"), (ranges[0].get("high") or {}).get("value")
    if low is not None and high is not None:
        return f"{low}-{high}"
    if low is not None:
        return f">{low}"
    return f"<{high}" if high is not None else escape(ranges[0].get("text", ""))


def abnormal_flag(observation: dict) -> str:
    """OBX-8: the record's interpretation, else the value against its own reference range."""
    flags = tables()["abnormal_flag"]
    for concept in observation.get("interpretation") or ():
        for coding in concept.get("coding") or ():
            if coding.get("code") in flags:
                return flags[coding["code"]]
    value = (observation.get("valueQuantity") or {}).get("value")
    ranges = observation.get("referenceRange") or ()
    if value is None or not ranges:
        return ""
    low, high = (ranges[0].get("low") or {}).get("value"), (ranges[0].get("high") or {}).get("value")
    if low is not None and value < low:
        return "L"
    if high is not None and value > high:
        return "H"
    return "N"


def _oru(control: str, sent: str, event: Outbound) -> Message:
    t = tables()
    obs = event.observation or {}
    message = _header("R01", control, sent)
    result = message.add_group("ORU_R01_PATIENT_RESULT")
    patient = result.add_group("ORU_R01_PATIENT")
    _fill_pid(patient.pid, event.patient)
    if event.encounter is not None:
        _fill_pv1(patient.add_group("ORU_R01_VISIT").pv1, event)
    order = result.add_group("ORU_R01_ORDER_OBSERVATION")
    status = t["result_status"].get(obs.get("status", "final"), "F")
    code = _coded(obs.get("code") or {})
    order.obr.obr_1 = "1"
    accession = _identifier(event.specimen, SPECIMEN_IDENTIFIER)
    if accession:
        order.obr.obr_2 = f"{clip(escape(accession), 199)}^{t['patient_identifier']['authority']}"
    instance = _identifier(obs, LAB_IDENTIFIER)
    if instance:
        order.obr.obr_3 = f"{clip(escape(instance), 199)}^{t['patient_identifier']['authority']}"
    order.obr.obr_4 = code
    effective = obs.get("effectiveDateTime") or (obs.get("effectivePeriod") or {}).get("start")
    if effective:
        order.obr.obr_7 = ts(effective)
    if obs.get("issued"):
        order.obr.obr_22 = ts(obs["issued"])
    order.obr.obr_25 = status
    obx = order.add_group("ORU_R01_OBSERVATION").obx
    obx.obx_1 = "1"
    quantity = obs.get("valueQuantity")
    if quantity is not None and quantity.get("value") is not None:
        obx.obx_2 = "NM"
        obx.obx_5 = str(quantity["value"])
        unit = quantity.get("code") or quantity.get("unit")
        if unit:
            obx.obx_6 = clip(escape(str(unit)), 20)
    elif obs.get("valueString") is not None:
        obx.obx_2 = "TX"
        for line in _lines(escape(obs["valueString"]), 199):
            obx.add_field("obx_5").value = line
    obx.obx_3 = code
    obx.obx_4 = "1"
    if (reference := _range(obs)):
        obx.obx_7 = clip(reference, 60)
    if (flag := abnormal_flag(obs)):
        obx.obx_8 = flag
    obx.obx_11 = status
    if effective:
        obx.obx_14 = ts(effective)
    if obs.get("issued"):
        obx.obx_19 = ts(obs["issued"])
    return message
