"""MIMIC-IV-Note -> DocumentReference (not part of the official mapping; Rounds' own extension).

Id: uuid5(ns("DocumentReference"), note_id), the official recipe with a namespace of our own, so notes
get stable ids next to the official resources. The text is a base64 text/plain attachment; subject and
context.encounter reference the official Patient and Encounter ids.
"""

from __future__ import annotations

import base64
from typing import Any

from fhir_mapper.context import MapContext
from fhir_mapper.fhir import CS, IDENTIFIER, LOINC, compact
from fhir_mapper.ids import fhir_id, ref
from fhir_mapper.values import instant

PROFILE = "DocumentReference"
NOTE_KINDS = {  # table -> LOINC document type
    "note/discharge": ("18842-5", "Discharge summary"),
    "note/radiology": ("18748-4", "Diagnostic imaging study"),
}
CLINICAL_NOTE = [
    {
        "coding": [
            {
                "system": "http://hl7.org/fhir/us/core/CodeSystem/us-core-documentreference-category",
                "code": "clinical-note",
                "display": "Clinical Note",
            }
        ]
    }
]


def document_reference(table: str, row: dict[str, str]) -> dict[str, Any]:
    loinc, display = NOTE_KINDS[table]
    when = instant(row["charttime"])
    return compact(
        {
            "resourceType": "DocumentReference",
            "id": fhir_id(PROFILE, row["note_id"]),
            "identifier": [{"system": f"{IDENTIFIER}note", "value": row["note_id"]}],
            "status": "current",
            "docStatus": "final",
            "type": {
                "coding": [
                    {"system": LOINC, "code": loinc, "display": display},
                    *([{"system": f"{CS}note-type", "code": row["note_type"]}] if row["note_type"] else []),
                ]
            },
            "category": CLINICAL_NOTE,
            "subject": ref("Patient", "Patient", row["subject_id"]),
            "date": instant(row["storetime"]) or when,
            "content": [
                {
                    "attachment": compact(
                        {
                            "contentType": "text/plain; charset=utf-8",
                            "data": base64.b64encode(row["text"].encode("utf-8")).decode("ascii"),
                            "title": f"{display} {row['note_id']}",
                            "creation": when,
                        }
                    )
                }
            ],
            "context": compact(
                {
                    "encounter": [ref("Encounter", "Encounter", row["hadm_id"])] if row["hadm_id"] else None,
                    "period": {"start": when} if when else None,
                }
            ),
        }
    )


def run(ctx: MapContext) -> None:
    """DocumentReference for every discharge and radiology note present."""
    for table in NOTE_KINDS:
        if ctx.has(table):
            for row in ctx.rows(table):
                ctx.emit(PROFILE, document_reference(table, row))
        else:
            ctx.report.missing_tables.add(table)
