"""`rounds demo`: the whole loop once, on the embedded default (SQLite + SQL event log, no broker, no server).

synthesize (or read a MIMIC-IV folder) → map to FHIR R4 → load → build record-grounded scenarios → run each
demo assistant (`baseline`, `oracle`, `weak`) through physician/patient sessions against the FHIR sandbox →
score every session from the log → `report.html` + `report.json` → a results table. Every stage is the real
component a user would run by hand (`rounds synth|map|load|scenarios build|run|score|report`); the demo only
strings them together, so it proves a fresh clone does the job Rounds exists for.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from contracts.languages import LANGUAGES
from rounds.root import Root

DEMO_ASSISTANTS = ("baseline", "oracle", "weak")


@dataclass
class DemoResult:
    """What the demo did: counts per stage, the scored run of each assistant, where the report is."""

    figures: dict = field(default_factory=dict)
    reports: dict = field(default_factory=dict)  # assistant spec -> RunReport
    seconds: dict[str, float] = field(default_factory=dict)  # stage -> wall seconds
    html: Path | None = None
    json: dict[str, Path] = field(default_factory=dict)  # assistant spec -> its report.json


@contextmanager
def _timed(result: DemoResult, name: str, step: Callable[[str], None]) -> Iterator[None]:
    step(name)
    started = time.perf_counter()
    yield
    result.seconds[name] = round(time.perf_counter() - started, 2)


def _build_scenarios(root: Root, out: Path, seed: int, sessions: int, per_category: int):
    from services.fhir_api.app import app_on_engine
    from services.simulator.scenarios import build_async, output

    app = app_on_engine(root.settings, root.engine())
    build = asyncio.run(build_async(app, seed, sessions, None, per_category))
    output.write(out, build.scenarios, build.summary)
    return build


def _run_and_score(
    root: Root,
    scenarios: Path,
    assistant: str,
    run_id: str,
    concurrency: int,
    on_session: Callable[[], None],
):
    from services.consumers.scoring.api import score_run
    from services.simulator.orchestrator.entry import RunOptions, run_scenarios
    from services.simulator.orchestrator.jobs import plan, read_scenarios

    jobs = plan(read_scenarios(scenarios), 1, LANGUAGES, "implicit")
    options = RunOptions(run_id, concurrency=concurrency, resume=False)
    summary = asyncio.run(
        run_scenarios(jobs, assistant, options, root, progress=lambda _outcome: on_session())
    )
    return summary, score_run(root, run_id)


def run_demo(
    patients: int,
    seed: int,
    mimic: Path | None,
    workdir: Path,
    database_url: str,
    *,
    out: Path | None = None,
    sessions: int = 16,
    per_category: int = 1,
    assistants: tuple[str, ...] = DEMO_ASSISTANTS,
    concurrency: int = 8,
    step: Callable[[str], None] = lambda _name: None,
    on_session: Callable[[], None] = lambda: None,
) -> DemoResult:
    """Run every stage, on one composition root (one engine, one bus); the CLI prints the result and the
    tests read it."""
    root = Root.from_environment(database_url, bus="sql")
    try:
        return _stages(root, patients, seed, mimic, workdir, out=out, sessions=sessions,
                       per_category=per_category, assistants=assistants, concurrency=concurrency, step=step,
                       on_session=on_session)
    finally:
        root.close()


def _stages(root: Root, patients: int, seed: int, mimic: Path | None, workdir: Path, *, out: Path | None,
            sessions: int, per_category: int, assistants: tuple[str, ...], concurrency: int,
            step: Callable[[str], None], on_session: Callable[[], None]) -> DemoResult:
    from fhir_mapper.pipeline import run_map
    from fhir_mapper.synth.generate import generate
    from services.consumers.report.html_page import render_html
    from services.consumers.report.json_io import to_json
    from services.fhir_api.load import load_ndjson

    out = out or workdir
    out.mkdir(parents=True, exist_ok=True)
    result = DemoResult()
    if mimic is None:
        with _timed(result, "synthesize", step):
            mimic = workdir / "mimic"
            result.figures["synthetic_rows"] = sum(generate(mimic, patients, seed).values())
    with _timed(result, "map", step):
        fhir_dir = workdir / "fhir"
        summary, _ = run_map(mimic, fhir_dir, workers=1)  # one core of two: the rest of the machine is free
        result.figures["mapped_resources"] = summary["total_resources"]
        result.figures["rejected_rows"] = summary["rejected_rows"]
    with _timed(result, "load", step):
        loaded = load_ndjson(root.upgrade().engine(), fhir_dir, workers=1)
        result.figures["loaded_resources"] = loaded.resources
    with _timed(result, "scenarios", step):
        scenario_file = out / "scenarios.jsonl"
        build = _build_scenarios(root, scenario_file, seed, sessions, per_category)
        result.figures["scenarios"] = len(build.scenarios)
        result.figures["turns"] = sum(len(s.turns) for s in build.scenarios)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for spec in assistants:
        with _timed(result, f"run {spec}", step):
            run_id = f"demo-{spec}-{stamp}"
            _summary, report = _run_and_score(root, scenario_file, spec, run_id, concurrency, on_session)
            result.reports[spec] = report
    with _timed(result, "report", step):
        ordered = list(result.reports.values())
        result.html = out / "report.html"
        # baseline compared turn by turn with the oracle (the upper bound), the weak assistant beside them
        html = render_html(ordered[0], *ordered[1:2], more=ordered[2:])
        result.html.write_text(html, encoding="utf-8")
        for spec, report in result.reports.items():
            result.json[spec] = out / f"report-{spec}.json"
            result.json[spec].write_text(to_json(report), encoding="utf-8")
    result.figures["sessions"] = sum(r.metrics.sessions + r.metrics.excluded_sessions for r in ordered)
    return result
