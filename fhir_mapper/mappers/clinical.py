"""Conditions and Procedures coded with ICD (hospital and ED), data-driven by `ICD_TABLES`, and the ICU
procedure/input events coded with d_items (ProcedureICU, MedicationAdministrationICU)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fhir_mapper import vocab
from fhir_mapper.context import MapContext
from fhir_mapper.fhir import CS, compact, concept, meta, period, quantity
from fhir_mapper.ids import fhir_id, ref
from fhir_mapper.values import instant, number, squash, strip

ENCOUNTER_DIAGNOSIS = [
    {
        "coding": [
            {
                "system": "http://terminology.hl7.org/CodeSystem/condition-category",
                "code": "encounter-diagnosis",
                "display": "Encounter Diagnosis",
            }
        ]
    }
]


@dataclass(frozen=True)
class IcdTable:
    """A table of ICD-coded rows mapped to Condition or Procedure."""

    profile: str  # output profile and id namespace
    table: str
    resource_type: str  # Condition | Procedure
    kind: str  # diagnosis | procedure: code systems mimic-<kind>-icd9 / -icd10
    titles: str  # dictionary table giving long_title
    encounter: tuple[str, str]  # (namespace, key column)
    profile_url: str
    performed: str | None = None  # column with the date performed
    title_column: str | None = None  # fallback display carried by the row itself
    known_patients_only: bool = False  # ED tables are inner-joined to hosp.patients


ICD_TABLES = {
    "diagnoses_icd": IcdTable(
        "Condition",
        "hosp/diagnoses_icd",
        "Condition",
        "diagnosis",
        "hosp/d_icd_diagnoses",
        ("Encounter", "hadm_id"),
        "condition",
    ),
    "procedures_icd": IcdTable(
        "Procedure",
        "hosp/procedures_icd",
        "Procedure",
        "procedure",
        "hosp/d_icd_procedures",
        ("Encounter", "hadm_id"),
        "procedure",
        performed="chartdate",
    ),
    "ed_diagnosis": IcdTable(
        "ConditionED",
        "ed/diagnosis",
        "Condition",
        "diagnosis",
        "hosp/d_icd_diagnoses",
        ("EncounterED", "stay_id"),
        "condition",
        title_column="icd_title",
        known_patients_only=True,
    ),
}


def icd_resource(rule: IcdTable, row: dict[str, str], titles: dict[tuple[str, str], str]) -> dict[str, Any]:
    code, version = row["icd_code"].strip(), row["icd_version"]
    ns, key_column = rule.encounter
    title = titles.get((code, version)) or (strip(row[rule.title_column]) if rule.title_column else None)
    system = f"{CS}{rule.kind}-icd{'9' if version == '9' else '10'}"
    resource = {
        "resourceType": rule.resource_type,
        "id": fhir_id(rule.profile, f"{row[key_column]}-{row['seq_num']}-{row['icd_code']}"),
        "meta": meta(rule.profile_url),
        "code": {"coding": [compact({"system": system, "code": code, "display": title})]},
        "subject": ref("Patient", "Patient", row["subject_id"]),
        "encounter": ref("Encounter", ns, row[key_column]),
    }
    if rule.resource_type == "Condition":
        resource["category"] = ENCOUNTER_DIAGNOSIS
    else:
        resource["status"] = "completed"
        if rule.performed and row[rule.performed]:
            resource["performedDateTime"] = instant(row[rule.performed])
    return resource


def icd_job(name: str):
    rule = ICD_TABLES[name]

    def run(ctx: MapContext) -> None:
        titles = ctx.lookup(rule.titles) if ctx.has(rule.titles) else {}
        subjects = ctx.lookup("subjects") if rule.known_patients_only else None
        for row in ctx.rows(rule.table):
            if subjects is not None and row["subject_id"] not in subjects:
                continue
            ctx.emit(rule.profile, icd_resource(rule, row, titles))

    run.__doc__ = f"{rule.profile} from {rule.table}."
    return run


def _icu_key(row: dict[str, str]) -> str:
    return f"{row['stay_id']}-{row['orderid']}-{row['itemid']}"


def procedure_icu(row: dict[str, str], label: str | None) -> dict[str, Any]:
    site = squash(row["location"])
    return compact(
        {
            "resourceType": "Procedure",
            "id": fhir_id("ProcedureICU", _icu_key(row)),
            "meta": meta("procedure-icu"),
            "status": vocab.PROCEDURE_ICU_STATUS.get(row["statusdescription"], "unknown"),
            "category": concept(f"{CS}procedure-category", row["ordercategoryname"] or None),
            "code": {
                "coding": [compact({"system": f"{CS}d-items", "code": row["itemid"], "display": label})]
            },
            "bodySite": [concept(f"{CS}bodysite", site)] if site else None,
            "subject": ref("Patient", "Patient", row["subject_id"]),
            "encounter": ref("Encounter", "EncounterICU", row["stay_id"]),
            "performedPeriod": period(instant(row["starttime"]), instant(row["endtime"])),
        }
    )


def medication_administration_icu(row: dict[str, str], label: str | None) -> dict[str, Any]:
    rate = number(row["rate"])
    amount_unit, rate_unit = strip(row["amountuom"]), strip(row["rateuom"])
    return compact(
        {
            "resourceType": "MedicationAdministration",
            "id": fhir_id("MedicationAdministrationICU", _icu_key(row)),
            "meta": meta("medication-administration-icu"),
            "status": "completed",
            "category": concept(f"{CS}medadmin-category-icu", row["ordercategoryname"] or None),
            "medicationCodeableConcept": {
                "coding": [
                    compact({"system": f"{CS}medication-icu", "code": row["itemid"], "display": label})
                ]
            },
            "subject": ref("Patient", "Patient", row["subject_id"]),
            "context": ref("Encounter", "EncounterICU", row["stay_id"]),
            "effectivePeriod": period(instant(row["starttime"]), instant(row["endtime"]))
            if rate is not None
            else None,
            "effectiveDateTime": instant(row["endtime"]) if rate is None else None,
            "dosage": compact(
                {
                    "method": concept(f"{CS}medication-method-icu", row["ordercategorydescription"] or None),
                    "dose": quantity(number(row["amount"]), amount_unit),
                    "rateQuantity": quantity(rate, rate_unit),
                }
            ),
        }
    )


ICU_ITEM_TABLES = {
    "procedureevents": ("icu/procedureevents", "ProcedureICU", procedure_icu),
    "inputevents": ("icu/inputevents", "MedicationAdministrationICU", medication_administration_icu),
}


def icu_items_job(name: str):
    table, profile, build = ICU_ITEM_TABLES[name]

    def run(ctx: MapContext) -> None:
        items = ctx.lookup("d_items")
        for row in ctx.rows(table):
            item = items.get(row["itemid"])
            if item is None:
                ctx.reject(table, row, f"unknown itemid {row['itemid']} (not in d_items)")
                continue
            ctx.emit(profile, build(row, item["label"] or None))

    run.__doc__ = f"{profile} from {table}."
    return run
