"""FHIR-AgentBench on Rounds: the shared question file (EHRSQL-2024 validation split, 347 questions) imported
against the mapped MIMIC-IV demo, run by `oracle` and `baseline:fhir-agentbench` through real sandboxes on
the embedded default, scored from the log; prints the import counts and both assistants side by side
(answer correctness, retrieval recall, retrieval precision, overall with 95 % intervals and by main table).

    # a store holding the demo: `rounds demo --mimic ../shared/data/mimic-iv-demo` leaves one in rounds.sqlite
    python benchmarks/bench_fhir_agentbench.py --database-url sqlite:///rounds.sqlite [--limit N] \
        [--assistants oracle,baseline:fhir-agentbench]

It writes runs (`fab-oracle-<stamp>`, `fab-baseline-<stamp>`) into that store's log: point it at a copy.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rounds.settings import Settings  # noqa: E402
from services.consumers.scoring.api import score_run  # noqa: E402
from services.simulator.orchestrator.entry import RunOptions, run_scenarios  # noqa: E402
from services.simulator.orchestrator.jobs import plan, read_scenarios  # noqa: E402
from services.simulator.scenarios import output  # noqa: E402
from services.simulator.scenarios.fhir_agentbench.cli import counts_lines  # noqa: E402
from services.simulator.scenarios.fhir_agentbench.importer import import_questions  # noqa: E402
from services.simulator.scenarios.fhir_agentbench.rows import read_questions  # noqa: E402
from tests.wiring import app_on, migrated, root_on  # noqa: E402

CSV = REPO.parent / "shared" / "data" / "fhir-agentbench" / "questions_valid.csv"
ASSISTANTS = ("oracle", "baseline:fhir-agentbench")
FIGURES = ("answer_correctness", "retrieval_recall", "retrieval_precision")


def _cell(figures: dict, name: str, with_ci: bool) -> str:
    value = figures.get(name)
    if value is None:
        return "–"
    ci = (figures.get("ci95") or {}).get(name)
    return f"{value:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if with_ci and ci else "")


def table(reports: dict[str, dict]) -> list[str]:
    """Markdown rows: overall, then by main table; per assistant correct / recall / precision."""
    names = [f"{a}: {f.split('_')[-1]}" for a in reports for f in FIGURES]
    head = "| questions | n | " + " | ".join(names) + " |"
    lines = [head, "|" + "---|" * (2 + len(reports) * len(FIGURES))]
    first = next(iter(reports.values()))
    overall = {name: {**r["metrics"], "ci95": r["metrics"]["ci95"]} for name, r in reports.items()}
    lines.append(f"| all | {first['answers']['questions']} | " + " | ".join(
        _cell(overall[a], f, True) for a in reports for f in FIGURES) + " |")
    for table_name in sorted(first["answers"]["by"]["main_table"]):
        rows = {a: r["answers"]["by"]["main_table"].get(table_name, {}) for a, r in reports.items()}
        n = rows[next(iter(reports))].get("questions", 0)
        lines.append(f"| {table_name} | {n} | " + " | ".join(
            _cell(rows[a], f, False) for a in reports for f in FIGURES) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--csv", type=Path, default=CSV)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--assistants", default=",".join(ASSISTANTS), help="comma-separated specs")
    args = parser.parse_args()
    settings = Settings(database_url=args.database_url)
    questions = read_questions(args.csv)[: args.limit]
    started = time.perf_counter()
    imported = asyncio.run(import_questions(app_on(settings), questions))
    print(f"import: {time.perf_counter() - started:.1f} s")
    for line in counts_lines(imported.summary):
        print(line)
    stamp = time.strftime("%Y%m%d%H%M%S")
    reports: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "fab.jsonl"
        output.write(path, imported.scenarios, imported.summary)
        jobs = plan(read_scenarios(path), 1, ("en",), "implicit")
        for spec in args.assistants.split(","):
            run_id = f"fab-{spec.split(':')[0]}-{stamp}"
            started = time.perf_counter()
            summary = asyncio.run(run_scenarios(jobs, spec, RunOptions(run_id), migrated(settings)))
            report = score_run(root_on(settings), run_id, timeout_s=600)
            print(f"{spec}: {len(jobs)} sessions in {time.perf_counter() - started:.1f} s "
                  f"(run and score), end reasons {dict(summary.by_reason)}")
            reports[spec] = report.model_dump()
    print()
    print("\n".join(table(reports)))


if __name__ == "__main__":
    main()
