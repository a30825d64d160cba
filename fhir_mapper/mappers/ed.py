"""MIMIC-IV-ED: EncounterED, ProcedureED, ObservationED, ObservationVitalSignsED, MedicationDispenseED,
MedicationStatementED (ConditionED is an ICD table, see clinical.py).

triage and vitalsign are wide rows (one column per measurement); the official mapping unpivots them.
`ED_EXAM` and `ED_VITALS` say which columns become which coded Observation.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from fhir_mapper.context import MapContext
from fhir_mapper.fhir import CS, LOINC, OBS_CATEGORY, SNOMED, UCUM, UNKNOWN_ABSENT, compact, concept, meta
from fhir_mapper.ids import fhir_id, ref
from fhir_mapper.mappers.core import ENCOUNTER_TYPE, org_ref
from fhir_mapper.values import instant, number

# column -> LOINC (code, display); Observation.valueString
ED_EXAM = {
    "rhythm": ("8884-9", "Heart rate rhythm"),
    "pain": ("98137-3", "Pain assessment report"),
    "acuity": ("56839-4", "Acuity assessment Narrative"),
    "chiefcomplaint": ("8661-1", "Chief complaint - Reported"),
}
EXAM_COLUMNS = {"ed/vitalsign": ("rhythm", "pain"), "ed/triage": ("pain", "acuity", "chiefcomplaint")}
EXAM_CATEGORY = {"ed/vitalsign": ("exam", "Exam"), "ed/triage": ("survey", "Survey")}
# column -> LOINC (code, display), UCUM (unit, code); dbp carries the blood pressure panel with sbp
ED_VITALS = {
    "temperature": ("8310-5", "Body temperature", ("F", "[degF]")),
    "resprate": ("9279-1", "Respiratory rate", ("breaths/minute", "/min")),
    "heartrate": ("8867-4", "Heart rate", ("beats/minute", "/min")),
    "o2sat": ("2708-6", "Oxygen saturation in Arterial blood", ("%", "%")),
    "dbp": ("85354-9", "Blood pressure panel with all children optional", None),
}
BP_COMPONENTS = (("sbp", "8480-6", "Systolic blood pressure"), ("dbp", "8462-4", "Diastolic blood pressure"))
PROCEDURES = {
    "ed/triage": ("386478007", "Triage: emergency center (procedure)"),
    "ed/vitalsign": ("410188000", "Taking patient vital signs assessment (procedure)"),
}


def encounter_ed(row: dict[str, str]) -> dict[str, Any]:
    return compact(
        {
            "resourceType": "Encounter",
            "id": fhir_id("EncounterED", row["stay_id"]),
            "meta": meta("encounter"),
            "identifier": [
                {
                    "value": row["stay_id"],
                    "system": "http://mimic.mit.edu/fhir/mimic/identifier/encounter-ed",
                    "use": "usual",
                    "assigner": org_ref(),
                }
            ],
            "status": "finished",
            "class": {
                "system": "http://terminology.hl7.org/CodeSystem/v3-ActCode",
                "code": "EMER",
                "display": "emergency",
            },
            "type": ENCOUNTER_TYPE,
            "subject": ref("Patient", "Patient", row["subject_id"]),
            "period": compact({"start": instant(row["intime"]), "end": instant(row["outtime"])}),
            "partOf": ref("Encounter", "Encounter", row["hadm_id"]) if row["hadm_id"] else None,
            "hospitalization": compact(
                {
                    "admitSource": concept(f"{CS}admit-source", row["arrival_transport"] or None),
                    "dischargeDisposition": concept(f"{CS}discharge-disposition", row["disposition"] or None),
                }
            ),
            "serviceProvider": org_ref(),
        }
    )


def _loinc(code: str, display: str) -> dict[str, Any]:
    return {"coding": [{"system": LOINC, "code": code, "display": display}]}


def _quantity(value: Any, units: tuple[str, str]) -> dict[str, Any]:
    return {"value": value, "unit": units[0], "system": UCUM, "code": units[1]}


def _bp_components(row: dict[str, str]) -> list[dict[str, Any]]:
    out = []
    for column, code in BP_CODES:
        value = number(row[column])
        if value is None:
            out.append({"code": code, "dataAbsentReason": UNKNOWN_ABSENT})
        else:
            out.append({"code": code, "valueQuantity": _quantity(value, ("mm[Hg]", "mm[Hg]"))})
    return out


class _Stay:
    """Keys of one triage (once per stay, at the ED arrival time) or vitalsign (per charttime) row, and
    what all of the row's resources share (built once per row, reused as the same objects)."""

    def __init__(self, table: str, row: dict[str, str], intime: str | None) -> None:
        self.triage = table == "ed/triage"
        self.stay, self.time = row["stay_id"], (intime if self.triage else row["charttime"])
        self.procedure_id = fhir_id("ProcedureED", self.stay if self.triage else f"{self.stay}-{self.time}")
        self.part_of = [{"reference": f"Procedure/{self.procedure_id}"}]
        self.instant = instant(self.time or "")
        self.common = {
            "subject": ref("Patient", "Patient", row["subject_id"]),
            "encounter": ref("Encounter", "EncounterED", self.stay),
        }


PROCEDURE_META, EXAM_META, VITAL_META = (
    meta("procedure-ed"),
    meta("observation-ed"),
    meta("observation-vital-signs"),
)
PROCEDURE_CODES = {
    table: {"coding": [{"system": SNOMED, "code": code, "display": display}]}
    for table, (code, display) in PROCEDURES.items()
}
EXAM_CATEGORIES = {
    table: [{"coding": [{"system": OBS_CATEGORY, "code": code, "display": display}]}]
    for table, (code, display) in EXAM_CATEGORY.items()
}
EXAM_CODES = {column: _loinc(code, display) for column, (code, display) in ED_EXAM.items()}
VITAL_CATEGORY = [{"coding": [{"system": OBS_CATEGORY, "code": "vital-signs", "display": "Vital Signs"}]}]
VITAL_CODES = {column: _loinc(code, display) for column, (code, display, _units) in ED_VITALS.items()}
BP_CODES = [(column, _loinc(code, display)) for column, code, display in BP_COMPONENTS]


# The builders below add optional elements only when present (what `compact` does), in the official order.
def procedure_ed(table: str, s: _Stay) -> dict[str, Any]:
    procedure = {
        "resourceType": "Procedure",
        "id": s.procedure_id,
        "meta": PROCEDURE_META,
        "status": "completed",
        "code": PROCEDURE_CODES[table],
        **s.common,
    }
    if s.instant is not None:
        procedure["performedDateTime"] = s.instant
    return procedure


def observation_ed(table: str, s: _Stay, column: str, value: str) -> dict[str, Any]:
    key = f"{s.stay}-{s.time}-{column}" + ("-triage" if s.triage else "")
    obs = {
        "resourceType": "Observation",
        "id": fhir_id("ObservationED", key),
        "meta": EXAM_META,
        "status": "final",
        "category": EXAM_CATEGORIES[table],
        "code": EXAM_CODES[column],
        **s.common,
    }
    if s.instant is not None:
        obs["effectiveDateTime"] = s.instant
    if value:
        obs["valueString"] = value
    else:
        obs["dataAbsentReason"] = UNKNOWN_ABSENT
    obs["partOf"] = s.part_of
    return obs


def vital_sign_ed(s: _Stay, column: str, row: dict[str, str]) -> dict[str, Any]:
    units = ED_VITALS[column][2]
    value = number(row[column])
    key = f"{s.stay}-{column}" if s.triage else f"{s.stay}-{s.time}-{column}"
    obs: dict[str, Any] = {
        "resourceType": "Observation",
        "id": fhir_id("ObservationVitalSigns", key),
        "meta": VITAL_META,
        "status": "final",
        "category": VITAL_CATEGORY,
    }
    if value is None:
        obs["dataAbsentReason"] = UNKNOWN_ABSENT
    obs["code"] = VITAL_CODES[column]
    obs.update(s.common)
    obs["partOf"] = s.part_of
    if s.instant is not None:
        obs["effectiveDateTime"] = s.instant
    if units and value is not None:
        obs["valueQuantity"] = _quantity(value, units)
    if column == "dbp":
        obs["component"] = _bp_components(row)
    return obs


def medication_dispense_ed(row: dict[str, str]) -> dict[str, Any]:
    return compact(
        {
            "resourceType": "MedicationDispense",
            "id": fhir_id("MedicationDispenseED", f"{row['stay_id']}-{row['med_rn']}-{row['gsn_rn']}"),
            "meta": meta("medication-dispense-ed"),
            "status": "unknown",
            "medicationCodeableConcept": compact(
                {
                    "text": row["name"] or None,
                    "coding": [{"code": row["gsn"], "system": f"{CS}medication-gsn"}] if row["gsn"] else None,
                }
            ),
            "subject": ref("Patient", "Patient", row["subject_id"]),
            "context": ref("Encounter", "EncounterED", row["stay_id"]),
            "whenHandedOver": instant(row["charttime"]),
        }
    )


def medication_statement_ed(key: tuple[str, ...], rows: list[dict[str, str]]) -> dict[str, Any]:
    stay, charttime, name, gsn, ndc = key
    coding = None
    if gsn and gsn != "0":
        coding = [{"code": gsn, "system": f"{CS}medication-gsn"}]
        if ndc and ndc != "0":
            coding.append({"code": ndc, "system": "http://hl7.org/fhir/sid/ndc"})
        etc = {r["etccode"].strip(): r["etcdescription"] for r in rows if r["etccode"].strip()}
        coding += [
            compact({"code": c, "display": d or None, "system": f"{CS}medication-etc"})
            for c, d in etc.items()
        ]
    return compact(
        {
            "resourceType": "MedicationStatement",
            "id": fhir_id("MedicationStatementED", "-".join(key)),
            "meta": meta("medication-statement-ed"),
            "status": "unknown",
            "medicationCodeableConcept": compact({"text": name or None, "coding": coding}),
            "subject": ref("Patient", "Patient", max((r["subject_id"] for r in rows), key=int)),
            "context": ref("Encounter", "EncounterED", stay),
            "dateAsserted": instant(charttime),
        }
    )


def run(ctx: MapContext) -> None:
    """All ED profiles except ConditionED; rows of subjects absent from hosp/patients are left out."""
    subjects = ctx.lookup("subjects")
    intime: dict[str, str] = {}
    for row in ctx.rows("ed/edstays"):
        intime[row["stay_id"]] = row["intime"]
        if row["subject_id"] in subjects:
            ctx.emit("EncounterED", encounter_ed(row))
    for table in ("ed/triage", "ed/vitalsign"):
        for row in ctx.rows(table):
            if row["subject_id"] not in subjects:
                continue
            s = _Stay(table, row, intime.get(row["stay_id"]))
            ctx.emit("ProcedureED", procedure_ed(table, s))
            if s.time is None:
                continue  # a triage row without its ED stay has no time to key on
            for column in EXAM_COLUMNS[table]:
                ctx.emit("ObservationED", observation_ed(table, s, column, row[column]))
            for column in ED_VITALS:
                ctx.emit("ObservationVitalSignsED", vital_sign_ed(s, column, row))
    for row in ctx.rows("ed/pyxis"):
        if row["subject_id"] in subjects:
            ctx.emit("MedicationDispenseED", medication_dispense_ed(row))
    statements: dict[tuple[str, ...], list[dict[str, str]]] = defaultdict(list)
    for row in ctx.rows("ed/medrecon"):
        if row["subject_id"] in subjects:
            key = (row["stay_id"], row["charttime"], row["name"], row["gsn"], row["ndc"])
            statements[key].append({k: row[k] for k in ("subject_id", "etccode", "etcdescription")})
    for key, rows in statements.items():
        ctx.emit("MedicationStatementED", medication_statement_ed(key, rows))
