"""Scenario builder benchmark: build time on the mapped MIMIC-IV demo (goal < 30 s on 2 cores) and on 1,000
synthetic patients, split into the FHIR read and the selection/assembly, with CPU seconds (on a shared machine
wall time follows the neighbours, CPU time does not).

    python benchmarks/bench_scenarios.py [--demo-store URL] [--synthetic-store URL] [--patients 1000]
                                         [--skip-synthetic] [--workdir DIR]

Without a store URL the data is mapped (`rounds map`) and bulk-loaded into a fresh SQLite file first (not
timed). The build is the default one: 324 four-turn sessions + 30 tasks per MedAgentBench category, seed 0,
Rounds' FHIR API in-process (httpx ASGI transport).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DEMO = next((p for p in (REPO.parent / "shared" / "data" / "mimic-iv-demo",
                         REPO.parent.parent / "shared" / "data" / "mimic-iv-demo") if p.exists()), None)


def load(mimic: Path, work: Path) -> str:
    from fhir_mapper.pipeline import run_map
    from rounds.migrate import upgrade
    from tests.wiring import load_on

    out = work / "fhir"
    run_map(mimic, out, workers=2)
    url = f"sqlite:///{work / 'rounds.sqlite'}"
    upgrade(url)
    load_on(url, out, workers=2)
    return url


def build(url: str, label: str) -> None:
    from rounds.settings import get_settings
    from rounds.shards import ALL
    from services.simulator.scenarios import fhir_client
    from services.simulator.scenarios.builder import definitions_of, select, summarize
    from services.simulator.scenarios.parts import stream_into
    from services.simulator.scenarios.proposals import Proposals
    from tests.wiring import app_on

    app = app_on(get_settings().model_copy(update={"database_url": url}))

    async def run() -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        with tempfile.TemporaryDirectory(prefix="bench-charts-") as tmp:
            async with fhir_client(app) as client:
                streamed = await stream_into(client, Path(tmp) / "charts.spool", ALL,
                                             Proposals(definitions_of(None)))
            read_wall, read_cpu = time.perf_counter() - wall, time.process_time() - cpu
            wall2, cpu2 = time.perf_counter(), time.process_time()
            scenarios, stats, shortfall = select(streamed.proposals, streamed.shelf, 0, 324, None, 30)
            streamed.shelf.close()
        summary = summarize(scenarios, stats, shortfall, streamed.read, streamed.skipped, 0, "in-process")
        sel_wall, sel_cpu = time.perf_counter() - wall2, time.process_time() - cpu2
        moments = sum(len(c) for c in streamed.proposals.of.values())
        print(f"{label}: {streamed.read} patients ({len(streamed.skipped)} skipped), {moments:,} moments "
              f"proposed, {streamed.shelf.loads:,} charts read back, {summary['sessions']} sessions, "
              f"{summary['turns']} turns")
        print(f"  read   {read_wall:6.1f} s wall  {read_cpu:6.1f} s CPU (client + in-process server)")
        print(f"  select {sel_wall:6.1f} s wall  {sel_cpu:6.1f} s CPU")
        print(f"  total  {read_wall + sel_wall:6.1f} s wall  {read_cpu + sel_cpu:6.1f} s CPU")
        print(f"  by_family {summary['by_family']}")
        print(f"  by_difficulty {summary['by_difficulty']}  shortfall {summary['shortfall']}")

    asyncio.run(run())
    app.state.store.engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--demo-store")
    parser.add_argument("--synthetic-store")
    parser.add_argument("--patients", type=int, default=1000)
    parser.add_argument("--skip-synthetic", action="store_true")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-scenarios-") as tmp:
        work = args.workdir or Path(tmp)
        demo = args.demo_store
        if demo is None and DEMO is not None:
            (work / "demo").mkdir(parents=True, exist_ok=True)
            demo = load(DEMO, work / "demo")
        if demo:
            build(demo, "MIMIC-IV demo")
        if args.skip_synthetic:
            return
        synthetic = args.synthetic_store
        if synthetic is None:
            from fhir_mapper.synth import generate

            (work / "synth").mkdir(parents=True, exist_ok=True)
            generate(work / "synth" / "mimic", args.patients, seed=1)
            synthetic = load(work / "synth" / "mimic", work / "synth")
        build(synthetic, f"synthetic ({args.patients} patients)")


if __name__ == "__main__":
    main()
