"""Dictionary tables (d_labitems, d_items, d_icd_*, d_hcpcs) from the catalog, and the provider/caregiver
tables from the run's pools (drawn from the seed alone), as MIMIC-IV lists every provider whether or not a
given patient saw them: every shard writes them alike without knowing the other shards' patients."""

from __future__ import annotations

from fhir_mapper.synth.context import SynthState


def write_dictionaries(ctx: SynthState) -> None:
    cat, out = ctx.cat, ctx.out
    for itemid, item in sorted(cat.labs.items()):
        out.write(
            "hosp/d_labitems",
            {"itemid": itemid, "label": item["label"], "fluid": item["fluid"], "category": item["category"]},
        )
    for item in cat.d_items():
        out.write(
            "icu/d_items",
            {
                "itemid": item["itemid"],
                "label": item["label"],
                "abbreviation": item["abbreviation"],
                "linksto": item["linksto"],
                "category": item["category"],
                "unitname": item.get("unitname") or None,
                "param_type": item["param_type"],
            },
        )
    for table, concepts in (
        ("hosp/d_icd_diagnoses", cat.diagnoses),
        ("hosp/d_icd_procedures", cat.procedures),
    ):
        codes = {
            (v[0], int(version), v[1]) for concept in concepts.values() for version, v in concept.items()
        }
        for code, version, title in sorted(codes):
            out.write(table, {"icd_code": code, "icd_version": version, "long_title": title})
    for code, (long_description, category) in sorted(cat.hcpcs.items()):
        out.write(
            "hosp/d_hcpcs",
            {"code": code, "long_description": long_description, "short_description": category},
        )


def write_people(ctx: SynthState) -> None:
    for provider_id in ctx.providers:
        ctx.out.write("hosp/provider", {"provider_id": provider_id})
    for caregiver_id in ctx.caregivers:
        ctx.out.write("icu/caregiver", {"caregiver_id": caregiver_id})
