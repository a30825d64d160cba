"""Curated vocabularies (data/*.json) loaded once into plain lookups the generators draw from."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

DATA = Path(__file__).parent / "data"


def _load(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Catalog:
    labs: dict[int, dict]  # itemid -> d_labitems entry + unit/range/mean/sd/dp
    panels: dict[str, list[int]]
    daily_panels: list[str]
    repletion: dict[int, str]  # lab itemid -> drug given when the result is below range
    icu: dict
    drugs: dict[str, dict]
    bases: dict[str, dict]  # diluents written as drug_type BASE rows
    diagnoses: dict[str, dict]  # concept -> {"10": [code, title], "9": [code, title]}
    procedures: dict[str, dict]
    hcpcs: dict[str, list[str]]
    drg: dict[str, list[list[str]]]
    micro: dict
    scenarios: dict[str, dict]
    comorbidities: dict[str, dict]
    imaging: dict[str, dict]
    demo: dict

    def lab_range(self, itemid: int, gender: str) -> tuple[float | None, float | None]:
        item = self.labs[itemid]
        if gender == "F" and "low_f" in item:
            return item["low_f"], item["high_f"]
        return item["low"], item["high"]

    def d_items(self) -> list[dict]:
        """Every icu d_items row the generator can emit, with its linksto table."""
        icu = self.icu
        numeric = [
            *icu["vitals"],
            *icu["ventilator"],
            *(icu[k] for k in ("fingerstick", "weight", "daily_weight", "height")),
        ]
        rows = [dict(v, linksto="chartevents", param_type="Numeric") for v in numeric]
        rows += [dict(v, linksto="chartevents", param_type="Text", unitname="") for v in icu["text_items"]]
        rows += [dict(v, linksto="inputevents", param_type="Solution") for v in icu["inputs"].values()]
        rows.append(dict(icu["ingredient"], linksto="ingredientevents", param_type="Ingredient"))
        rows += [dict(v, linksto="outputevents", param_type="Numeric") for v in icu["outputs"]]
        rows += [
            dict(v, linksto="procedureevents", param_type="Processes", unitname="")
            for v in icu["procedures"].values()
        ]
        rows += [
            dict(v, linksto="datetimeevents", param_type="Date and time", unitname="")
            for v in icu["datetimes"]
        ]
        return sorted(rows, key=lambda r: r["itemid"])


@cache
def catalog() -> Catalog:
    labs, icu, drugs, codes = _load("labs"), _load("icu_items"), _load("drugs"), _load("codes")
    micro, scen, demo = _load("micro"), _load("scenarios"), _load("demographics")
    return Catalog(
        labs={item["itemid"]: item for item in labs["items"]},
        panels=labs["panels"],
        daily_panels=labs["daily_panels"],
        repletion={int(k): v for k, v in labs["repletion"].items()},
        icu=icu,
        drugs=drugs["drugs"],
        bases=drugs["bases"],
        diagnoses=codes["diagnoses"],
        procedures=codes["procedures"],
        hcpcs=codes["hcpcs"],
        drg=codes["drg"],
        micro=micro,
        scenarios=scen["scenarios"],
        comorbidities=scen["comorbidities"],
        imaging=scen["imaging"],
        demo=demo,
    )
