#!/usr/bin/env python3
"""Generate services/fhir_api/auth/data/patient_compartment.json from FHIR R4's CompartmentDefinition-patient.

Every resource type the definition lists with parameters, each parameter with the element paths its
SearchParameter's FHIRPath expression reads for that type (the union's part for the type, with
`.where(resolve() is Patient)` filters and `as` casts dropped: the reference must name a Patient anyway).
auth/compartment.py judges membership by these paths for the types the search index does not cover, and the
index (search_params.json's `patient_compartment`) for the ones it does.
Run:  python scripts/gen_patient_compartment.py [path/to/hl7.fhir.r4.examples-4.0.1.tgz]
"""

from __future__ import annotations

import json
import re
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_TGZ = REPO.parent / "shared" / "data" / "fhir-r4-examples" / "hl7.fhir.r4.examples-4.0.1.tgz"
OUT = REPO / "services" / "fhir_api" / "auth" / "data" / "patient_compartment.json"
_WHERE = re.compile(r"\.where\([^()]*(\([^()]*\))?[^()]*\)")
_CAST = re.compile(r"^\(?\s*([\w.]+?)\s+as\s+\w+\s*\)?$")


def _split_union(expr: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in expr:
        depth += (ch == "(") - (ch == ")")
        if ch == "|" and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [*parts, cur.strip()]


def element_paths(expression: str, resource_type: str) -> list[str]:
    """The dotted element paths (below the resource) `expression` reads for `resource_type`."""
    paths: list[str] = []
    for part in _split_union(expression):
        part = _WHERE.sub("", part).strip()
        cast = _CAST.match(part)
        part = cast.group(1) if cast else part.strip("()")
        if part.startswith(f"{resource_type}.") and re.fullmatch(r"[\w.]+", part):
            paths.append(part[len(resource_type) + 1:])
    return paths


def load(tgz: Path) -> tuple[dict, list[dict]]:
    definition, params = {}, []
    with tarfile.open(tgz) as tar:
        for member in tar:
            name = member.name.rsplit("/", 1)[-1]
            if name == "CompartmentDefinition-patient.json":
                definition = json.load(tar.extractfile(member))
            elif name.startswith("SearchParameter-") or name == "Bundle-searchParams.json":
                doc = json.load(tar.extractfile(member))
                bundled = doc["resourceType"] == "Bundle"
                found = [e.get("resource", {}) for e in doc.get("entry", [])] if bundled else [doc]
                params += [p for p in found if p.get("resourceType") == "SearchParameter"]
    return definition, params


def build(tgz: Path) -> dict:
    definition, params = load(tgz)
    by_code: dict[tuple[str, str], str] = {}
    for sp in params:
        for base in sp.get("base", []):
            by_code.setdefault((base, sp["code"]), sp.get("expression", ""))
    table: dict[str, dict[str, list[str]]] = {}
    for entry in definition["resource"]:
        if not entry.get("param"):
            continue
        rtype = entry["code"]
        table[rtype] = {}
        for param in entry["param"]:
            paths = element_paths(by_code.get((rtype, param), ""), rtype)
            if param == "{def}" or not paths:
                raise SystemExit(f"{rtype}.{param}: no element path in its SearchParameter")
            table[rtype][param] = paths
    return {"source": f"{definition['url']} ({definition.get('version', 'R4')}), element paths from the "
                      "SearchParameter expressions of hl7.fhir.r4.examples 4.0.1",
            "resources": table}


if __name__ == "__main__":
    tgz = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_TGZ
    OUT.write_text(json.dumps(build(tgz), indent=1, sort_keys=True) + "\n")
    print(f"{OUT.relative_to(REPO)}: {len(json.loads(OUT.read_text())['resources'])} resource types")
