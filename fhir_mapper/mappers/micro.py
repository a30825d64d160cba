"""Microbiology: Specimen (micro), ObservationMicroTest / MicroOrg / MicroSusc.

microbiologyevents has one row per (specimen, test, organism, antibiotic); the official mapping
aggregates per specimen, per (specimen, test) and per (specimen, test, organism). Groups are keyed by
specimen, so they are bounded by the number of specimens, not by rows.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from fhir_mapper import vocab
from fhir_mapper.context import MapContext
from fhir_mapper.fhir import CS, INTERPRETATION, LABORATORY, compact, identifier, meta
from fhir_mapper.ids import fhir_id, ref, ref_once
from fhir_mapper.values import instant, number
from fhir_mapper.vocab import NULL_FLAVOR

DILUTION = "http://mimic.mit.edu/fhir/mimic/StructureDefinition/dilution-details"
DILUTION_COMPARATOR = {"=>": ">=", "<=": "<="}


def _max(values: list[str]) -> str | None:
    present = [v for v in values if v]
    return max(present) if present else None


def _max_int(values: list[str]) -> str | None:
    present = [v for v in values if v]
    return max(present, key=int) if present else None


def _when(r: dict[str, str]) -> str:
    return r["charttime"] or r["chartdate"]


def _stored(rows: list[dict[str, str]]) -> str | None:
    """When the rows' results were stored (their latest storetime; a storedate alone is a date: the end of
    that day, store/known_time.json `dates`): the Observation's `issued`, so a culture is known when its
    result was, not at collection. None when no row was stored."""
    local = [
        r["storetime"] or f"{r['storedate'][:10]} 23:59:59" for r in rows if r["storetime"] or r["storedate"]
    ]
    return instant(max(local)) if local else None  # local times in one format: text order is time order


def specimen(spec: str, rows: list[dict[str, str]]) -> dict[str, Any]:
    desc = _max([r["spec_type_desc"] for r in rows])
    charttime = _max([r["charttime"] for r in rows])
    return compact(
        {
            "resourceType": "Specimen",
            "id": fhir_id("SpecimenMicro", spec),
            "meta": meta("specimen"),
            "identifier": identifier("specimen-micro", spec),
            "type": {
                "coding": [
                    compact(
                        {
                            "code": _max_int([r["spec_itemid"] for r in rows]),
                            "display": desc,
                            "system": f"{CS}spec-type-desc",
                        }
                    )
                ]
            }
            if desc
            else None,
            "subject": ref("Patient", "Patient", _max_int([r["subject_id"] for r in rows])),
            "collection": {"collectedDateTime": instant(charttime)} if charttime else None,
        }
    )


def _micro_observation(
    profile: str, key: str, codes: str, code: str, display: str | None, subject: str | None, **rest: Any
) -> dict[str, Any]:
    """The header the three microbiology Observation profiles share, plus their own elements."""
    kebab = "observation-micro-" + profile.removeprefix("ObservationMicro").lower()
    return compact(
        {
            "resourceType": "Observation",
            "id": fhir_id(profile, key),
            "meta": meta(kebab),
            "status": "final",
            "category": LABORATORY,
            "code": {
                "coding": [compact({"system": f"{CS}microbiology-{codes}", "code": code, "display": display})]
            },
            "subject": ref("Patient", "Patient", subject) if subject else None,
            **rest,
        }
    )


def micro_test(spec: str, test: str, rows: list[dict[str, str]]) -> dict[str, Any]:
    by_org: dict[str, list[dict[str, str]]] = defaultdict(list)
    for r in rows:
        by_org[r["org_itemid"]].append(r)
    strings, nulls = [], []
    for org, group in by_org.items():
        comments = _max([r["comments"] for r in group])
        if not org:
            if comments == "___":
                nulls.append("MSK")
            elif comments:
                strings.append(comments)
            else:
                nulls.append("NI")
    value_string, null_flavor = _max(strings), _max(nulls)
    organisms = sorted(o for o in by_org if o)
    hadm = _max_int([r["hadm_id"] for r in rows])
    members = [ref_once("Observation", "ObservationMicroOrg", f"{test}-{spec}-{o}") for o in organisms]
    absent = "masked" if null_flavor == "MSK" else "NoInformation"
    return _micro_observation(
        "ObservationMicroTest",
        f"{spec}-{test}",
        "test",
        test,
        _max([r["test_name"] for r in rows]),
        _max_int([r["subject_id"] for r in rows]),
        specimen=ref_once("Specimen", "SpecimenMicro", spec),
        encounter=ref("Encounter", "Encounter", hadm) if hadm else None,
        effectiveDateTime=instant(_max([_when(r) for r in rows])),
        issued=_stored(rows),
        hasMember=members if value_string is None and members else None,
        valueString=value_string,
        valueCodeableConcept={"coding": [{"code": null_flavor, "system": NULL_FLAVOR, "display": absent}]}
        if null_flavor
        else None,
    )


def micro_org(spec: str, test: str, org: str, rows: list[dict[str, str]]) -> dict[str, Any]:
    susc = [r["microevent_id"] for r in rows if r["ab_itemid"]]
    comments = _max([r["comments"] for r in rows])
    return _micro_observation(
        "ObservationMicroOrg",
        f"{test}-{spec}-{org}",
        "organism",
        org,
        _max([r["org_name"] for r in rows]),
        _max_int([r["subject_id"] for r in rows]),
        effectiveDateTime=instant(_max([_when(r) for r in rows])),
        issued=_stored(rows),
        hasMember=[ref_once("Observation", "ObservationMicroSusc", e) for e in susc] or None,
        valueString=None if susc else (comments or "No susceptibility data present"),
        derivedFrom=[ref_once("Observation", "ObservationMicroTest", f"{spec}-{test}")],
    )


def micro_susc(r: dict[str, str]) -> dict[str, Any]:
    interp = vocab.MICRO_INTERPRETATION.get(r["interpretation"])
    dilution = number(r["dilution_value"])
    comparator = DILUTION_COMPARATOR.get(r["dilution_comparison"].strip())
    org_key = f"{r['test_itemid']}-{r['micro_specimen_id']}-{r['org_itemid']}"
    return _micro_observation(
        "ObservationMicroSusc",
        r["microevent_id"],
        "antibiotic",
        r["ab_itemid"],
        r["ab_name"] or None,
        r["subject_id"],
        extension=[{"url": DILUTION, "valueQuantity": compact({"value": dilution, "comparator": comparator})}]
        if dilution is not None
        else None,
        identifier=identifier("observation-micro-susc", r["microevent_id"]),
        effectiveDateTime=instant(r["storetime"]),
        valueCodeableConcept={"coding": [{"system": INTERPRETATION, "code": interp[0], "display": interp[1]}]}
        if interp
        else None,
        derivedFrom=[ref_once("Observation", "ObservationMicroOrg", org_key)],
        note=[{"text": r["comments"]}] if r["comments"] else None,
    )


_KEEP = (
    "microevent_id",
    "micro_specimen_id",
    "subject_id",
    "hadm_id",
    "chartdate",
    "charttime",
    "spec_itemid",
    "spec_type_desc",
    "storedate",
    "storetime",
    "test_itemid",
    "test_name",
    "org_itemid",
    "org_name",
    "ab_itemid",
    "ab_name",
    "dilution_comparison",
    "dilution_value",
    "interpretation",
    "comments",
)


def _concat(a: list, b: list) -> list:
    a.extend(b)
    return a


def run(ctx: MapContext) -> None:
    """Specimen, ObservationMicroTest, ObservationMicroOrg, ObservationMicroSusc."""
    by_specimen = ctx.groups(_concat)
    for r in ctx.rows("hosp/microbiologyevents", _KEEP):
        if r["ab_itemid"]:
            ctx.emit("ObservationMicroSusc", micro_susc(r))
        by_specimen.add(r["micro_specimen_id"], [r])
    for spec, rows in by_specimen.items():
        ctx.emit("Specimen", specimen(spec, rows))
        by_test: dict[str, list[dict[str, str]]] = defaultdict(list)
        for r in rows:
            by_test[r["test_itemid"]].append(r)
        for test, test_rows in by_test.items():
            ctx.emit("ObservationMicroTest", micro_test(spec, test, test_rows))
            by_org: dict[str, list[dict[str, str]]] = defaultdict(list)
            for r in test_rows:
                if r["org_itemid"]:
                    by_org[r["org_itemid"]].append(r)
            for org, org_rows in by_org.items():
                ctx.emit("ObservationMicroOrg", micro_org(spec, test, org, org_rows))
