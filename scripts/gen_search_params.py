#!/usr/bin/env python3
"""Generate services/fhir_api/search/search_params.json from the HL7 FHIR R4 examples package.

Reads the SearchParameter definitions (files and the bundled `search-parameters` Bundle, then Rounds' own in
services/fhir_api/search/local_search_params.json), the resource StructureDefinitions (to know which elements
are choice types and what type each path ends in) and CompartmentDefinition-patient. Each FHIRPath expression
is compiled into a small path program that services/fhir_api/search/extract.py runs; expressions outside the
compiled subset are kept but flagged unsupported (and so never advertised).
Run:  python scripts/gen_search_params.py [path/to/examples.tgz]
"""

from __future__ import annotations

import json
import re
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_TGZ = REPO.parent / "shared" / "data" / "fhir-r4-examples" / "hl7.fhir.r4.examples-4.0.1.tgz"
OUT = REPO / "services" / "fhir_api" / "search" / "search_params.json"
# Rounds' own SearchParameter resources (R4 JSON, in a Bundle), compiled with the package's: a parameter the
# R4 package does not define is added there, then this script is run.
LOCAL = REPO / "services" / "fhir_api" / "search" / "local_search_params.json"

# Every type the mapper produces, plus what assistants write (ServiceRequest, Communication) and audit.
RESOURCE_TYPES = [
    "Patient",
    "Encounter",
    "Location",
    "Organization",
    "Condition",
    "Procedure",
    "Observation",
    "Specimen",
    "Medication",
    "MedicationRequest",
    "MedicationDispense",
    "MedicationAdministration",
    "MedicationStatement",
    "DocumentReference",
    "ServiceRequest",
    "Communication",
    "AuditEvent",
]
COMMON_BASES = ("Resource", "DomainResource")
SUPPORTED_TYPES = {"token", "string", "date", "number", "quantity", "reference", "uri"}


def _load(tgz: Path) -> tuple[list[dict], dict[str, dict], dict]:
    params: dict[str, dict] = {}
    sds: dict[str, dict] = {}
    compartment: dict = {}
    with tarfile.open(tgz) as tar:
        for member in tar:
            name = member.name.rsplit("/", 1)[-1]
            if not name.endswith(".json"):
                continue
            if (
                name.startswith("SearchParameter-")
                or name == "Bundle-searchParams.json"
                or (name.startswith("StructureDefinition-") or name == "CompartmentDefinition-patient.json")
            ):
                doc = json.load(tar.extractfile(member))
            else:
                continue
            if doc.get("resourceType") == "SearchParameter":
                params[doc["url"]] = doc
            elif doc.get("resourceType") == "Bundle":
                for entry in doc.get("entry", []):
                    res = entry.get("resource", {})
                    if res.get("resourceType") == "SearchParameter":
                        params.setdefault(res["url"], res)
            elif doc.get("resourceType") == "StructureDefinition" and doc.get("kind") != "logical":
                if doc.get("derivation") == "specialization" or doc["type"] in ("Resource", "DomainResource"):
                    sds[doc["type"]] = doc
            elif doc.get("resourceType") == "CompartmentDefinition":
                compartment = doc
    for entry in json.loads(LOCAL.read_text(encoding="utf-8")).get("entry", []):
        local = entry["resource"]
        if local["url"] in params:
            raise ValueError(f"{LOCAL.name}: {local['url']} is the R4 package's already")
        params[local["url"]] = local
    return list(params.values()), sds, compartment


def _element_types(sds: dict[str, dict]) -> dict[str, list[str]]:
    """'Observation.effective[x]' -> ['dateTime', ...]; keys without [x] for plain elements."""
    out: dict[str, list[str]] = {}
    for sd in sds.values():
        for el in sd.get("snapshot", {}).get("element", []):
            codes = [t["code"].rsplit(".", 1)[-1] for t in el.get("type", [])]
            codes = ["string" if c == "String" else c for c in codes]
            out[el["path"]] = codes
    return out


class Unsupported(Exception):
    pass


_CAST = re.compile(r"^\(?([\w.]+?)\s+as\s+(\w+)\)?")


def _split_union(expr: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in expr:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "|" and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    return parts


def _tokens(path: str) -> list[str]:
    """Split on dots outside parentheses and quotes."""
    out, depth, cur, quote = [], 0, "", False
    for ch in path:
        if ch == "'":
            quote = not quote
        depth += ch == "(" and not quote
        depth -= ch == ")" and not quote
        if ch == "." and depth == 0 and not quote:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


def compile_branch(branch: str, types: dict[str, list[str]]) -> tuple[str, list, str]:
    """Compile one union branch into (base type, steps, terminal type). Raise Unsupported otherwise."""
    branch = _CAST.sub(r"\1.as(\2)", branch)  # (A as T).rest -> A.as(T).rest
    toks = _tokens(branch)
    base, steps, el_path = toks[0], [], toks[0]
    current: list[str] = [base]
    for tok in toks[1:]:
        if re.fullmatch(r"[A-Za-z]\w*", tok):
            el_path, current = _descend(el_path, current, tok, types)
            steps.append(["c", tok, current] if el_path.endswith("[x]") else ["f", tok])
            continue
        m = re.fullmatch(r"as\((\w+)\)|ofType\((\w+)\)", tok)
        if m:
            if not steps or steps[-1][0] != "c":
                raise Unsupported(f"cast of a non-choice element in {branch}")
            steps[-1][2] = current = [m.group(1) or m.group(2)]
            continue
        m = re.fullmatch(r"where\(resolve\(\) is (\w+)\)", tok)
        if m:
            steps.append(["r", m.group(1)])
            continue
        m = re.fullmatch(r"where\((\w+)\s*=\s*'([^']*)'\)", tok)
        if m:
            steps.append(["w", m.group(1), m.group(2)])
            continue
        raise Unsupported(f"cannot compile '{tok}' in {branch}")
    if len(steps) and steps[-1][0] == "c":
        current = steps[-1][2]
    return base, steps, current[0] if len(current) == 1 else "*"


def _descend(
    el_path: str, current: list[str], tok: str, types: dict[str, list[str]]
) -> tuple[str, list[str]]:
    for candidate in (f"{el_path}.{tok}", f"{el_path}.{tok}[x]"):
        if candidate in types:
            found = types[candidate]
            if found in (["BackboneElement"], ["Element"]) or not found:
                return candidate.replace("[x]", "") if not candidate.endswith("[x]") else candidate, [
                    candidate
                ]
            return candidate, found
    if len(current) == 1 and current[0][:1].isupper():  # datatype: continue from its own definition
        return (
            _descend(current[0], current, tok, types)
            if current[0] != el_path.split(".")[0]
            else (f"{el_path}.{tok}", ["*"])
        )
    return f"{el_path}.{tok}", ["*"]


# Parameters whose FHIRPath the compiler cannot read, written by hand: steps as in compiled branches (step
# "x": the element exists, as the boolean true) and `absent`, the value a resource without the element has
# (`deceased=false` is every patient not marked deceased; query.py asks it as `deceased:not=true`).
HAND_WRITTEN = {
    ("Patient", "deceased"): {
        "paths": [
            {"steps": [["c", "deceased", ["Boolean"]]], "type": "boolean"},
            {"steps": [["c", "deceased", ["DateTime"]], ["x"]], "type": "boolean"},
        ],
        "absent": "false",
    },
}


def build(tgz: Path) -> dict:
    params, sds, compartment = _load(tgz)
    types = _element_types(sds)
    table: dict[str, dict[str, dict]] = {t: {} for t in RESOURCE_TYPES}
    by_url = {sp["url"]: sp for sp in params}
    for sp in sorted(params, key=lambda p: p["url"]):
        bases = [b for b in sp.get("base", []) if b in RESOURCE_TYPES or b in COMMON_BASES]
        for base in bases:
            targets = RESOURCE_TYPES if base in COMMON_BASES else [base]
            for rtype in targets:
                entry = _entry(sp, rtype, base, types, by_url)
                if (rtype, sp["code"]) in HAND_WRITTEN:
                    entry.pop("unsupported", None)
                    entry.update(HAND_WRITTEN[rtype, sp["code"]])
                table[rtype].setdefault(sp["code"], entry)
    comp = {
        r["code"]: r["param"]
        for r in compartment.get("resource", [])
        if r["code"] in RESOURCE_TYPES and r.get("param")
    }
    return {
        "source": "hl7.fhir.r4.examples 4.0.1: SearchParameter, StructureDefinition, CompartmentDefinition",
        "resources": {t: dict(sorted(ps.items())) for t, ps in table.items()},
        "patient_compartment": comp,
    }


def _entry(sp: dict, rtype: str, base: str, types: dict[str, list[str]], by_url: dict[str, dict]) -> dict:
    entry = {
        "type": sp["type"],
        "doc": (sp.get("description") or "").split("\n")[0][:200],
        "expression": sp.get("expression") or "",
        "targets": sp.get("target", []),
        "paths": [],
    }
    reason = None
    if sp["type"] == "composite":
        entry["components"], entry["elements"], reason = _components(sp, rtype, types, by_url)
    elif sp["type"] not in SUPPORTED_TYPES:
        reason = f"{sp['type']} parameters are not supported"
    elif not sp.get("expression"):
        reason = "no FHIRPath expression (handled specially or not at all)"
    else:
        try:
            for branch in _split_union(sp["expression"]):
                head = _tokens(branch.strip("()"))[0].strip("(")
                if head not in (rtype, base):
                    continue
                b, steps, terminal = compile_branch(
                    branch.replace(f"{base}.", f"{rtype}.", 1) if head == base else branch, types
                )
                entry["paths"].append({"steps": steps, "type": terminal})
            if not entry["paths"]:
                reason = f"no branch of the expression applies to {rtype}"
        except Unsupported as exc:
            reason = str(exc)
            entry["paths"] = []
    if reason:
        entry["unsupported"] = reason
    return entry


ELEMENT_VALUE_KINDS = {"token", "string", "date", "number", "quantity", "uri"}


def _components(
    sp: dict, rtype: str, types: dict[str, list[str]], by_url: dict[str, dict]
) -> tuple[list[str], list[dict], str | None]:
    """How a composite is answered: (parameters ANDed on the resource, element specs, why not).

    - A branch over the resource itself (`Observation` in code-value-quantity and combo-…) pairs values that
      occur once per resource: it is the conjunction of parameters that index exactly the components'
      paths and nothing under a repeating element (checked on the compiled paths).
    - A branch over a repeating element (`Observation.component`) must pair values of ONE element: its
      spec (the element's path; the token part's and the value part's paths relative to it) tells
      extraction to store the value part's rows keyed by the token part (search/extract.py, composite.py).
      Only a token first and a plain value second are stored that way."""
    branches = [b.strip() for b in _split_union(sp.get("expression", ""))]
    components = sp.get("component", [])
    if len(components) != 2 or not all(b == rtype or b.startswith(f"{rtype}.") for b in branches):
        return [], [], "a composite of two parts over the resource or its elements is supported"
    parts = []
    for component in components:
        own = by_url.get(component.get("definition", ""))
        if own is None or own["type"] not in SUPPORTED_TYPES:
            return [], [], f"component {component.get('definition')} is not a supported parameter"
        # R4's code-value-date writes `value.as(DateTime)`: FHIR's primitive is dateTime (fixed in R4B).
        parts.append((own["type"], component["expression"].replace("as(DateTime)", "as(dateTime)")))
    elements = [b for b in branches if b != rtype]
    element_steps = [compile_branch(b, types)[1] for b in elements]
    root: list[str] = []
    if rtype in branches:
        for kind, expression in parts:
            reached = [compile_branch(f"{rtype}.{b.strip()}", types)[1] for b in _split_union(expression)]
            name = _root_param(rtype, kind, reached, element_steps, types, by_url)
            if name is None:
                return [], [], f"no {kind} parameter indexes exactly {expression!r} of {rtype}"
            root.append(name)
    specs = []
    for branch, steps in zip(elements, element_steps, strict=True):
        (first, first_expr), (second, second_expr) = parts
        if first != "token" or second not in ELEMENT_VALUE_KINDS or "|" in first_expr + second_expr:
            return [], [], f"{branch}: a token and a plain value are paired per element, not {first}/{second}"
        rel = []
        for kind, expression in parts:
            _, full, terminal = compile_branch(f"{branch}.{expression}", types)
            rel.append({"kind": kind, "steps": full[len(steps):], "type": terminal})
        specs.append({"steps": steps, "parts": rel})
    return root, specs, None


def _root_param(
    rtype: str, kind: str, reached: list, elements: list, types: dict[str, list[str]], by_url: dict[str, dict]
) -> str | None:
    """The parameter of `rtype` of this kind whose paths include every reached one and none under a
    repeating element of the composite (the fewest paths wins: `code` rather than `combo-code`)."""
    found = []
    for sp in by_url.values():
        if sp["type"] != kind or rtype not in sp.get("base", []):
            continue
        entry = _entry(sp, rtype, rtype, types, by_url)
        paths = [p["steps"] for p in entry["paths"]]
        if entry.get("unsupported") or any(steps not in paths for steps in reached):
            continue
        if any(path[: len(e)] == e for path in paths for e in elements):
            continue
        found.append((len(paths), sp["code"]))
    return min(found)[1] if found else None


def main() -> None:
    tgz = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_TGZ
    table = build(tgz)
    OUT.write_text(json.dumps(table, separators=(",", ":"), sort_keys=False) + "\n")
    n = sum(len(p) for p in table["resources"].values())
    bad = sum("unsupported" in e for p in table["resources"].values() for e in p.values())
    print(
        f"wrote {OUT.relative_to(REPO)}: {n} parameters, {len(table['resources'])} types, {bad} unsupported"
    )


if __name__ == "__main__":
    main()
