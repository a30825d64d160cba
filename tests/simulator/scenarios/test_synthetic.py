"""On `rounds synth --patients 200` data (mapped and loaded like the demo): the same coverage as on the real
demo, with no special case in the builder for synthetic records."""

from __future__ import annotations

from services.simulator.scenarios.families import families


def test_synthetic_patients_yield_the_same_coverage(synthetic_build) -> None:
    scenarios, summary = synthetic_build.scenarios, synthetic_build.summary
    multi = [s for s in scenarios if s.family != "medagentbench"]
    assert len(multi) >= 324 and all(len(s.turns) == 4 for s in multi)
    assert set(summary["by_family"]) == set(families())
    assert summary["by_family"]["medagentbench"] == 300
    assert {s.difficulty for s in multi} == {"L1", "L2", "L3"}
    assert summary["by_language"] == {"en": summary["turns"], "zh": summary["turns"]}
    assert summary["by_variant"] == {"explicit": summary["turns"], "implicit": summary["turns"]}
    assert summary["shortfall"] == {}


def test_synthetic_discharge_notes_reach_the_patient_memory(synthetic_build) -> None:
    """`rounds synth` writes discharge notes: their Social History becomes facts traced to the note."""
    noted = [
        fact
        for s in synthetic_build.scenarios
        for fact in s.patient_memory
        if any(src.startswith("DocumentReference/") for src in fact.sources)
    ]
    assert noted and all(fact.category == "social" for fact in noted)
