"""The builder on the real MIMIC-IV demo (mapped and loaded, read through the FHIR API): the volume and
coverage a benchmark needs, and sessions that hold together."""

from __future__ import annotations

from contracts.scenario import Scenario
from services.simulator.scenarios.families import families


def test_the_demo_yields_324_four_turn_sessions_of_every_family_and_difficulty(demo_build) -> None:
    multi = [s for s in demo_build.scenarios if s.family != "medagentbench"]
    assert len(multi) >= 324
    assert all(len(s.turns) == 4 and s.turns[0].task_type == "lookup" for s in multi)
    expected = set(families()) - {"medagentbench"}
    assert {s.family for s in multi} == expected
    assert {s.difficulty for s in multi} == {"L1", "L2", "L3"}
    summary = demo_build.summary
    assert summary["sessions"] == len(demo_build.scenarios)
    assert summary["by_language"] == {"en": summary["turns"], "zh": summary["turns"]}


def test_every_turn_has_both_languages_both_variants_and_a_checkable_rubric(demo_build) -> None:
    for scenario in demo_build.scenarios:
        for turn in scenario.turns:
            for lang in ("en", "zh"):
                phrasing = getattr(turn.text, lang)
                assert phrasing.explicit and phrasing.implicit
            assert any(ch >= "\u4e00" for ch in turn.text.zh.explicit), turn.text.zh.explicit
            assert turn.answer is not None and any(ch >= "\u4e00" for ch in turn.answer.zh)
            assert any(item.kind != "llm_judge" for item in turn.rubric)
            for item in turn.rubric:
                if item.kind == "fact_cited":
                    assert item.params["fact"] < len(turn.facts)
                if item.kind == "write_made":
                    assert item.params["write"] < len(turn.writes)
            if turn.tool_source == "patient":
                assert turn.patient_facts


def test_implicit_phrasing_is_shorter_and_differs_and_later_turns_name_their_anaphora(demo_build) -> None:
    for scenario in demo_build.scenarios:
        for turn in scenario.turns:
            assert turn.text.en.implicit != turn.text.en.explicit
            if turn.index and len(scenario.turns) > 1:
                assert turn.subtype in ("NA", "PE", "AE")


def test_every_fact_is_known_at_now_and_traced(demo_build) -> None:
    for scenario in demo_build.scenarios:
        for turn in scenario.turns:
            for fact in turn.facts:
                assert fact.reference or fact.references or fact.kind == "absent" or fact.kind == "count"
                if fact.time is not None and fact.kind != "decision":
                    assert fact.time <= scenario.now, (scenario.id, fact)
        for memory in scenario.patient_memory:
            assert memory.sources and memory.topics["en"] and memory.topics["zh"]


def test_lines_round_trip(demo_build) -> None:
    for scenario in demo_build.scenarios[:50]:
        assert Scenario.model_validate_json(scenario.model_dump_json(exclude_none=True)) == scenario
