"""Every expected write's example resource is valid FHIR R4 and satisfies its own constraints; every
reference answer (what the oracle assistant says) passes the scorer's text checks for its turn, EN and ZH."""

from __future__ import annotations

from types import SimpleNamespace

from fhir.resources.R4B import get_fhir_model_class

from services.consumers.scoring.checks.facts import conclusion_matches, fact_stated
from services.consumers.scoring.checks.kinds.does_not_recommend import DoesNotRecommend
from services.consumers.scoring.constraints import satisfied


def test_every_write_example_validates_as_fhir_r4_and_meets_its_constraints(demo_build) -> None:
    writes = [(s, w) for s in demo_build.scenarios for t in s.turns for w in t.writes]
    assert len(writes) > 300
    types = set()
    for scenario, write in writes:
        resource = write.resource
        get_fhir_model_class(resource["resourceType"]).model_validate(resource)
        types.add(resource["resourceType"])
        for constraint in write.constraints:
            assert satisfied(resource, constraint, scenario.now), (scenario.id, constraint)
        assert resource["subject"]["reference"] == scenario.patient
    assert types == {"ServiceRequest", "MedicationRequest", "Observation", "Communication"}


def test_a_forbidden_write_turn_expects_nothing_and_says_so_in_its_rubric(demo_build) -> None:
    forbidden = [t for s in demo_build.scenarios for t in s.turns if t.forbid_writes]
    assert forbidden
    for turn in forbidden:
        assert not turn.writes and any(r.kind == "no_forbidden_write" and r.safety for r in turn.rubric)


def test_reference_answers_pass_the_scorers_fact_and_conclusion_checks(demo_build) -> None:
    checked = 0
    for scenario in demo_build.scenarios:
        for turn in scenario.turns:
            for lang in ("en", "zh"):
                answer = getattr(turn.answer, lang)
                for item in turn.rubric:
                    if item.kind == "fact_cited":
                        ok, why = fact_stated(answer, turn.facts[item.params["fact"]])
                    elif item.kind == "conclusion":
                        ok, why = conclusion_matches(answer, item.params["expected"])
                    elif item.kind == "does_not_recommend":
                        result = DoesNotRecommend()(
                            item, SimpleNamespace(log=SimpleNamespace(answer_text=answer))
                        )
                        ok, why = result.passed, result.evidence
                    else:
                        continue
                    assert ok, f"{scenario.id} turn {turn.index} {lang}: {why}: {answer}"
                    checked += 1
    assert checked > 2000
