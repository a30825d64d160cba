"""The shared question file (../shared/data/fhir-agentbench/questions_valid.csv, 347 questions) on the whole
MIMIC-IV demo mapped and loaded by the project's own mapper and loader (tests/conftest.py
`full_demo_url`, loaded once per test run): the import's counts, the oracle at 1.0 correctness and 1.0
recall, and the suite's baseline below it. The sessions played are one question per template (51 of 347,
the first by question id), which keeps this file inside the suite's budget;
benchmarks/bench_fhir_agentbench.py plays all 347 and benchmarks/README.md quotes its figures.

ROUNDS_TEST_FULL_DEMO_STORE=sqlite:///path reuses a store already holding the whole demo (copied, never
written) for quick reruns."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rounds.settings import Settings
from services.consumers.scoring.api import score_run
from services.simulator.orchestrator.entry import RunOptions, run_scenarios
from services.simulator.orchestrator.jobs import plan, read_scenarios
from services.simulator.scenarios import output
from services.simulator.scenarios.fhir_agentbench.importer import import_questions
from services.simulator.scenarios.fhir_agentbench.rows import read_questions
from tests.wiring import app_on, migrated, root_on

FIGURES = ("answer_correctness", "retrieval_recall", "retrieval_precision")
pytestmark = pytest.mark.slow  # the whole demo loaded, 2 × 51 sessions


@pytest.fixture(scope="module")
def shared_csv(shared_data: Path) -> Path:
    path = shared_data / "fhir-agentbench" / "questions_valid.csv"
    if not path.exists():
        pytest.skip(f"{path} not found")
    return path


def _figures(settings: Settings, path: Path, spec: str, run_id: str) -> dict:
    jobs = plan(read_scenarios(path), 1, ("en",), "implicit")
    summary = asyncio.run(run_scenarios(jobs, spec, RunOptions(run_id), migrated(settings)))
    assert set(summary.by_reason) == {"completed"}
    metrics = score_run(root_on(settings), run_id, timeout_s=600).model_dump()["metrics"]
    return {k: round(metrics[k], 3) for k in FIGURES}


def test_the_shared_file_imports_and_the_reference_assistants_score(full_demo_url: str, shared_csv: Path,
                                                                     tmp_path: Path) -> None:
    settings = Settings(database_url=full_demo_url)
    imported = asyncio.run(import_questions(app_on(settings), read_questions(shared_csv)))
    s = imported.summary
    assert (s["questions"], s["sessions"]) == (347, 347)
    assert s["skipped"] == {"patient_absent": 0, "not_mappable": 0, "no_clock": 0}
    # SOURCES.md: microbiology Specimen ids under the wrong namespace, organism rows without an organism
    assert s["gold_ids"]["dropped_absent_from_record"] == {"Observation": 119, "Specimen": 50}
    assert s["gold_ids"]["kept"] == {"Condition": 68, "Encounter": 78, "Medication": 673,
                                     "MedicationRequest": 1018, "Observation": 2777, "Patient": 7,
                                     "Procedure": 24, "Specimen": 0}
    assert s["by_table"]["labevents"] == 84 and s["by_table"]["prescriptions"] == 84
    path = tmp_path / "fab.jsonl"
    output.write(path, one_per_template(imported.scenarios), s)
    oracle = _figures(settings, path, "oracle", "fab-oracle")
    assert (oracle["answer_correctness"], oracle["retrieval_recall"]) == (1.0, 1.0)
    baseline = _figures(settings, path, "baseline:fhir-agentbench", "fab-baseline")
    # the latest resource of the table answers few questions, though reading the table finds most gold ids
    assert baseline["answer_correctness"] < 0.5 < baseline["retrieval_recall"] < 1.0
    assert baseline["retrieval_precision"] < oracle["retrieval_precision"]


def one_per_template(scenarios: list) -> list:
    """The first question (by id) of each of the file's templates."""
    first: dict[str, object] = {}
    for scenario in sorted(scenarios, key=lambda sc: sc.source["question_id"]):
        first.setdefault(scenario.source["template"], scenario)
    assert len(first) == 51
    return list(first.values())
