"""search_params.json is what scripts/gen_search_params.py makes from the HL7 package — never a hand edit —
and its composites name parameters the table supports."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from services.fhir_api.search.registry import TABLE_PATH, get_param, params_for, resource_types

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "gen_search_params.py"


def test_the_committed_table_is_the_generators_output(shared_data: Path) -> None:
    spec = importlib.util.spec_from_file_location("gen_search_params", SCRIPT)
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    tgz = shared_data / "fhir-r4-examples" / "hl7.fhir.r4.examples-4.0.1.tgz"
    assert json.loads(json.dumps(generator.build(tgz))) == json.loads(TABLE_PATH.read_text())


def test_composites_say_how_they_are_answered() -> None:
    """Over the resource: two supported parameters to AND; over a repeating element: a token part and a value
    part, relative to the element; the one pairing a Reference (relationship) stays unsupported."""
    every = [p for t in resource_types() for p in params_for(t).values()]
    composites = {(p.resource_type, p.name): p for p in every if p.type == "composite"}
    assert {name for (_, name), p in composites.items() if p.unsupported} == {"relationship"}
    for (rtype, name), param in composites.items():
        if param.unsupported:
            continue
        assert param.components or param.elements, name
        assert all(get_param(rtype, c) is not None for c in param.components)
        assert len(param.components) in (0, 2)
        for element, parts in param.elements:
            assert element == (("f", "component"),) and [kind for kind, _, _ in parts][0] == "token"
    assert composites["Observation", "combo-code-value-quantity"].components == ("code", "value-quantity")
    assert composites["Observation", "component-code-value-quantity"].components == ()


def _generator():
    spec = importlib.util.spec_from_file_location("gen_search_params_local", SCRIPT)
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    return generator


ROUTE = {"resourceType": "SearchParameter", "url": "urn:rounds:sp:MedicationRequest-route", "code": "route",
         "base": ["MedicationRequest"], "type": "token", "description": "The route of the dosage instruction",
         "expression": "MedicationRequest.dosageInstruction.route"}


def test_a_local_search_parameter_is_compiled_with_the_packages(shared_data: Path, tmp_path: Path) -> None:
    """Rounds' own SearchParameter resources (local_search_params.json) become supported parameters as the
    R4 package's do; one that redefines a package parameter is refused."""
    generator = _generator()
    tgz = shared_data / "fhir-r4-examples" / "hl7.fhir.r4.examples-4.0.1.tgz"
    generator.LOCAL = tmp_path / "local.json"
    generator.LOCAL.write_text(json.dumps({"resourceType": "Bundle", "entry": [{"resource": ROUTE}]}))
    route = generator.build(tgz)["resources"]["MedicationRequest"]["route"]
    assert "unsupported" not in route and route["type"] == "token"
    assert route["paths"] and route["paths"][0]["type"] == "CodeableConcept"
    taken = {**ROUTE, "url": "http://hl7.org/fhir/SearchParameter/clinical-patient"}
    generator.LOCAL.write_text(json.dumps({"resourceType": "Bundle", "entry": [{"resource": taken}]}))
    with pytest.raises(ValueError, match="already"):
        generator.build(tgz)
