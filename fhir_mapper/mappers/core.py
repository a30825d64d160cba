"""Organization, Location, Patient, Encounter and EncounterICU: the administrative backbone.

One pass over transfers feeds all of them (careunits, first intime per subject, careunit periods per
admission); state is per patient/admission/stay, never per event row.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date as Date
from typing import Any

from fhir_mapper import vocab
from fhir_mapper.context import MapContext
from fhir_mapper.fhir import CS, SNOMED, compact, concept, identifier, meta, period
from fhir_mapper.ids import BIDMC_NPI_KEY, fhir_id, organization_id, ref
from fhir_mapper.values import date, instant

ACT_CODE = "http://terminology.hl7.org/CodeSystem/v3-ActCode"
US_CORE = "http://hl7.org/fhir/us/core/StructureDefinition/us-core-"
ENCOUNTER_TYPE = [
    {"coding": [{"system": SNOMED, "code": "308335008", "display": "Patient encounter procedure"}]}
]


def org_ref() -> dict[str, str]:
    return {"reference": f"Organization/{organization_id()}"}


def organization() -> dict[str, Any]:
    return {
        "resourceType": "Organization",
        "id": fhir_id("Organization", BIDMC_NPI_KEY),
        "meta": meta("organization"),
        "identifier": [{"system": "http://hl7.org/fhir/sid/us-npi", "value": "1194052720"}],
        "type": [
            {
                "coding": [
                    {
                        "system": "http://terminology.hl7.org/CodeSystem/organization-type",
                        "code": "prov",
                        "display": "Healthcare Provider",
                    }
                ]
            }
        ],
        "name": "Beth Israel Deaconess Medical Center",
        "active": True,
    }


def location(careunit: str) -> dict[str, Any]:
    return {
        "resourceType": "Location",
        "id": fhir_id("Location", careunit),
        "meta": meta("location"),
        "name": careunit,
        "physicalType": {
            "coding": [
                {
                    "system": "http://terminology.hl7.org/CodeSystem/location-physical-type",
                    "code": "wa",
                    "display": "Ward",
                }
            ]
        },
        "status": "active",
        "managingOrganization": org_ref(),
    }


def _years_before(day: str, years: int) -> str:
    d = Date.fromisoformat(day)
    try:
        return d.replace(year=d.year - years).isoformat()
    except ValueError:  # 29 February -> 28 February, as PostgreSQL interval arithmetic does
        return d.replace(year=d.year - years, day=28).isoformat()


def _patient_extensions(race: str | None, gender: str | None) -> list[dict[str, Any]] | None:
    """fn_patient_extension: nothing at all unless the race is one the ethnicity map knows."""
    if race not in vocab.RACE:
        return None
    (display, code, system), ethnicity = vocab.RACE[race]
    ext: list[dict[str, Any]] = [
        {
            "url": f"{US_CORE}race",
            "extension": [
                {"url": "ombCategory", "valueCoding": {"code": code, "display": display, "system": system}},
                {"url": "text", "valueString": display},
            ],
        }
    ]
    if ethnicity:
        ext.append(
            {
                "url": f"{US_CORE}ethnicity",
                "extension": [
                    {
                        "url": "ombCategory",
                        "valueCoding": {"code": ethnicity[1], "display": ethnicity[0], "system": vocab.OMB},
                    },
                    {"url": "text", "valueString": ethnicity[0]},
                ],
            }
        )
    if gender:
        ext.append({"url": f"{US_CORE}birthsex", "valueCode": gender})
    return ext


def patient(
    row: dict[str, str],
    first_intime: str | None,
    latest: dict[str, str | None] | None,
    ed_race: str | None,
    deathtime: str | None = None,
) -> dict[str, Any]:
    """`deathtime`: admissions.deathtime of an in-hospital death, the precise time `dod` (a date) only
    dates; deceasedDateTime carries it so the death is known when it happened (store/known_time.json
    `death`), not from the start of its date."""
    sid = row["subject_id"]
    latest = latest or {}
    marital = vocab.MARITAL_STATUS.get(latest.get("marital_status"))
    race = latest.get("race") or ed_race
    birth = _years_before(first_intime[:10], int(row["anchor_age"])) if first_intime else None
    return compact(
        {
            "resourceType": "Patient",
            "id": fhir_id("Patient", sid),
            "meta": meta("patient"),
            "extension": _patient_extensions(race, row["gender"] or None),
            "identifier": identifier("patient", sid),
            "name": [{"use": "official", "family": f"Patient_{sid}"}],
            "gender": vocab.GENDER.get(row["gender"]),
            "birthDate": birth,
            "deceasedDateTime": instant(deathtime) if deathtime else date(row["dod"]),
            "maritalStatus": {"coding": [{"system": marital[0], "code": marital[1]}]} if marital else None,
            "communication": [{"language": {"coding": [{"system": "urn:ietf:bcp:47", "code": "en"}]}}]
            if latest.get("language") == "ENGLISH"
            else None,
            "managingOrganization": org_ref(),
        }
    )


def encounter(
    row: dict[str, str], stays: list[tuple[str, str, str]], cpt: list[dict[str, Any]], service: str | None
) -> dict[str, Any]:
    hadm = row["hadm_id"]
    cls = vocab.ADMISSION_TYPE.get(row["admission_type"])
    return compact(
        {
            "resourceType": "Encounter",
            "id": fhir_id("Encounter", hadm),
            "meta": meta("encounter"),
            "identifier": identifier("encounter-hosp", hadm, use="usual", assigner=org_ref()),
            "status": "finished",
            "class": compact({"system": ACT_CODE, "code": cls[0], "display": cls[1]})
            if cls
            else {"system": ACT_CODE},
            "type": cpt or ENCOUNTER_TYPE,
            "priority": {
                "coding": [
                    {
                        "system": "http://terminology.hl7.org/CodeSystem/v3-ActPriority",
                        "code": cls[2],
                        "display": cls[3],
                    }
                ]
            }
            if cls
            else None,
            "serviceType": concept(f"{CS}services", service),
            "subject": ref("Patient", "Patient", row["subject_id"]),
            "period": period(instant(row["admittime"]), instant(row["dischtime"])),
            "hospitalization": compact(
                {
                    "admitSource": concept(f"{CS}admit-source", row["admission_location"] or None),
                    "dischargeDisposition": concept(
                        f"{CS}discharge-disposition", row["discharge_location"] or None
                    ),
                }
            ),
            "location": [
                compact(
                    {"location": ref("Location", "Location", unit), "period": period(instant(i), instant(o))}
                )
                for i, o, unit in sorted(stays)
            ]
            or None,
            "serviceProvider": org_ref(),
        }
    )


def _unit_period(stays: list[tuple[str, str, str]], unit: str, start: str, end: str) -> dict[str, str] | None:
    inside = [(i, o) for i, o, u in stays if u == unit and i and o and i >= start and o <= end]
    if not inside:
        return None
    return period(instant(min(i for i, _ in inside)), instant(max(o for _, o in inside)))


def encounter_icu(row: dict[str, str], stays: list[tuple[str, str, str]]) -> dict[str, Any]:
    first, last = row["first_careunit"], row["last_careunit"]
    locations = [
        compact(
            {
                "location": ref("Location", "Location", first),
                "period": _unit_period(stays, first, row["intime"], row["outtime"]),
            }
        )
    ]
    if last != first:
        locations.append(
            compact(
                {
                    "location": ref("Location", "Location", last),
                    "period": _unit_period(stays, last, row["intime"], row["outtime"]),
                }
            )
        )
    return compact(
        {
            "resourceType": "Encounter",
            "id": fhir_id("EncounterICU", row["stay_id"]),
            "meta": meta("encounter"),
            "identifier": identifier("encounter-icu", row["stay_id"]),
            "status": "finished",
            "class": {"system": ACT_CODE, "code": "ACUTE"},
            "type": ENCOUNTER_TYPE,
            "subject": ref("Patient", "Patient", row["subject_id"]),
            "period": period(instant(row["intime"]), instant(row["outtime"])),
            "location": locations,
            "partOf": ref("Encounter", "Encounter", row["hadm_id"]),
        }
    )


def run(ctx: MapContext) -> None:
    """Organization, Location, Patient, Encounter, EncounterICU."""
    ctx.emit("Organization", organization())
    careunits: set[str] = set()
    first_intime: dict[str, str] = {}
    stays: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for r in ctx.rows("hosp/transfers"):
        sid, intime = r["subject_id"], r["intime"]
        if intime and (sid not in first_intime or intime < first_intime[sid]):
            first_intime[sid] = intime
        if r["careunit"]:
            careunits.add(r["careunit"])
            if r["hadm_id"]:
                stays[r["hadm_id"]].append((intime, r["outtime"], r["careunit"]))
    for unit in sorted(careunits):
        ctx.emit("Location", location(unit))

    admissions = list(ctx.rows("hosp/admissions"))
    latest: dict[str, dict[str, str | None]] = {}
    latest_time: dict[str, str] = {}
    deathtime: dict[str, str] = {}  # an in-hospital death: its admission's deathtime
    for a in admissions:  # MIN(marital_status/race/language) over the latest admittime(s)
        if a["deathtime"] and a["deathtime"] > deathtime.get(a["subject_id"], ""):
            deathtime[a["subject_id"]] = a["deathtime"]
        sid, t = a["subject_id"], a["admittime"]
        if sid not in latest_time or t > latest_time[sid]:
            latest_time[sid], latest[sid] = t, {"marital_status": None, "race": None, "language": None}
        if t == latest_time[sid]:
            cur = latest[sid]
            for k in cur:
                if a[k] and (cur[k] is None or a[k] < cur[k]):
                    cur[k] = a[k]
    ed_race: dict[str, tuple[str, str]] = {}
    if ctx.has("ed/edstays"):
        for e in ctx.rows("ed/edstays"):
            sid = e["subject_id"]
            if sid not in ed_race or e["outtime"] > ed_race[sid][0]:
                ed_race[sid] = (e["outtime"], e["race"])
    for p in ctx.rows("hosp/patients"):
        sid = p["subject_id"]
        # the official query inner-joins transfers for the demographics
        latest_row = latest.get(sid) if sid in first_intime else None
        race = (ed_race.get(sid) or (None, None))[1]
        ctx.emit("Patient", patient(p, first_intime.get(sid), latest_row, race, deathtime.get(sid)))

    cpt: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for h in ctx.rows("hosp/hcpcsevents"):
        if h["hcpcs_cd"] and h["hadm_id"]:
            cpt[h["hadm_id"]].append(
                {
                    "coding": [
                        compact(
                            {
                                "system": f"{CS}hcpcs-cd",
                                "code": h["hcpcs_cd"],
                                "display": h["short_description"] or None,
                            }
                        )
                    ]
                }
            )
    first_service: dict[str, tuple[str, str]] = {}
    for s in ctx.rows("hosp/services"):
        h = s["hadm_id"]
        if h not in first_service or s["transfertime"] < first_service[h][0]:
            first_service[h] = (s["transfertime"], s["curr_service"])
    for a in admissions:
        h = a["hadm_id"]
        ctx.emit(
            "Encounter",
            encounter(a, stays.get(h, []), cpt.get(h, []), (first_service.get(h) or ("", None))[1]),
        )
    for icu in ctx.rows("icu/icustays"):
        ctx.emit("EncounterICU", encounter_icu(icu, stays.get(icu["hadm_id"], [])))
