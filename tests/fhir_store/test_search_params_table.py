"""search_params.json is what scripts/gen_search_params.py makes from the HL7 package — never a hand edit —
and its composites name parameters the table supports."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from services.fhir_api.search.registry import TABLE_PATH, get_param, params_for, resource_types

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gen_search_params.py"


def test_the_committed_table_is_the_generators_output(shared_data: Path) -> None:
    spec = importlib.util.spec_from_file_location("gen_search_params", SCRIPT)
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    tgz = shared_data / "fhir-r4-examples" / "hl7.fhir.r4.examples-4.0.1.tgz"
    assert json.loads(json.dumps(generator.build(tgz))) == json.loads(TABLE_PATH.read_text())


def test_supported_composites_are_over_the_resource_and_name_supported_parameters() -> None:
    composites = [p for t in resource_types() for p in params_for(t).values() if p.type == "composite"]
    supported = {p.name for p in composites if not p.unsupported}
    assert supported == {"code-value-concept", "code-value-date", "code-value-quantity", "code-value-string"}
    for param in composites:
        if param.unsupported:
            assert not param.components and param.expression != param.resource_type
            continue
        assert param.expression == param.resource_type and len(param.components) == 2
        assert all(get_param(param.resource_type, c) is not None for c in param.components)
