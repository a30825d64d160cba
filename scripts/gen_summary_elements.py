"""Generate services/fhir_api/http/summary_elements.json from the R4 StructureDefinitions.

For every resource type: its top-level elements marked `isSummary` (what `_summary=true` keeps) and those with
`min >= 1` (kept by `_summary=text` and `_elements`). Run once when the FHIR package changes; the server
only reads the generated table, never ../shared.

    python scripts/gen_summary_elements.py [path/to/hl7.fhir.r4.examples-4.0.1.tgz]
"""

from __future__ import annotations

import json
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_PACKAGE = REPO.parent / "shared" / "data" / "fhir-r4-examples" / "hl7.fhir.r4.examples-4.0.1.tgz"
OUT = REPO / "services" / "fhir_api" / "http" / "summary_elements.json"


def resource_definitions(package: Path):
    """Yield the base StructureDefinition of every resource type in the package."""
    with tarfile.open(package) as tar:
        for member in tar:
            name = member.name.rsplit("/", 1)[-1]
            if not (name.startswith("StructureDefinition-") and name.endswith(".json")):
                continue
            sd = json.load(tar.extractfile(member))
            if sd.get("kind") == "resource" and sd.get("derivation") == "specialization":
                yield sd


def top_level(sd: dict) -> tuple[list[str], list[str]]:
    """(summary elements, mandatory elements), first level only, choice types kept as `name[x]`."""
    summary, mandatory = [], []
    for element in sd["snapshot"]["element"]:
        parts = element["path"].split(".")
        if len(parts) != 2:
            continue
        if element.get("isSummary"):
            summary.append(parts[1])
        if element.get("min", 0) >= 1:
            mandatory.append(parts[1])
    return summary, mandatory


def main(package: Path = DEFAULT_PACKAGE) -> None:
    table = {}
    for sd in sorted(resource_definitions(package), key=lambda s: s["type"]):
        summary, mandatory = top_level(sd)
        table[sd["type"]] = {"summary": summary, "mandatory": mandatory}
    OUT.write_text(json.dumps(table, indent=0, sort_keys=True) + "\n")
    print(f"{len(table)} resource types -> {OUT.relative_to(REPO)}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_PACKAGE)
