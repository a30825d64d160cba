"""The red team's validity table: every gaming assistant of tests/consumers/scoring/redteam against
`oracle`, `baseline`, silence (`weak`) and wrong facts, on the real MIMIC-IV demo scenarios (every family,
EN and ZH, implicit and explicit), each run played by the real simulator and scored by scorer versions 3
and 4 (2 on request); beside them the honest rephrasings of the oracle
(tests/consumers/scoring/redteam/honest.py) and
the second red team (tests/consumers/scoring/redteam/gamers_v4.py), alone and added to the baseline.

    python benchmarks/bench_redteam.py --store sqlite:////tmp/demo/rounds.sqlite [--per-family 5]

`--store` is a database holding the mapped demo (`rounds map` + `rounds load`; the sessions' events and
scores are written there too, so use a copy); the scenarios are built from it (seed 7) unless
`--scenarios FILE` names a built set. Prints the table (Avg and Pass@Session(0.75) per version), then the
must-show checks of the last version (issue 36): oracle 1.0; every honest rephrasing >= oracle - 0.05; every
gamer (old and new) <= 0.25 and >= 0.15 below baseline; baseline + a trick (spam writes, five latest values,
"Stable. No.", a count spray, invented finer values) never above baseline in any session; unit swaps cost
>= 0.1; correct facts > wrong facts > silence; explicit > implicit for baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from contracts.languages import LANGUAGES
from tests.wiring import client_on, migrated, root_on

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _scenarios(store: str, path: str | None, per_family: int):
    from contracts.scenario import Scenario

    if path:
        lines = [Scenario.model_validate_json(line) for line in Path(path).read_text().splitlines() if line]
    else:
        from services.simulator.scenarios import build_async
        from tests.simulator.scenarios.conftest import SEED, app_for

        lines = asyncio.run(build_async(app_for(store), seed=SEED)).scenarios
    taken: Counter = Counter()
    chosen = []
    for scenario in lines:
        if taken[scenario.family] < per_family:
            taken[scenario.family] += 1
            chosen.append((scenario, scenario.model_dump(mode="json")))
    return chosen


def _future(settings, chosen) -> dict[str, list[tuple[str, float, str]]]:
    """Each session's results after its clock, as an in-process assistant could read them off the store."""
    from services.consumers.scoring.fhir_state import StateReader, record_codes
    from services.simulator.scenarios.vocabulary import vocabulary

    names = {lab["itemid"]: lab["en"] for lab in vocabulary()["labs"].values()}
    reader = StateReader(client_on(settings))
    out: dict[str, list[tuple[str, float, str]]] = {}
    for scenario, _ in chosen:
        later = []
        for code in record_codes():
            for v in reader.record_values(scenario.patient, code):
                if v.time is not None and v.time > scenario.now:
                    later.append((v.time, names[code.rsplit("|", 1)[-1]], v.value, v.unit or ""))
        out[f"{scenario.patient}|{scenario.now.isoformat()}"] = [x[1:] for x in sorted(later)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--scenarios")
    parser.add_argument("--per-family", type=int, default=5)
    parser.add_argument("--variants", default="explicit,implicit")
    parser.add_argument("--only", help="comma-separated name parts: play only these assistants (with the "
                                       "re-scored ones, the table's rows)")
    parser.add_argument("--rescore", help="STAMP:N: re-score the first N assistants' runs of an earlier "
                                          "run of this benchmark (redteam-STAMP-<i>) instead of playing them")
    parser.add_argument("--versions", default="3,4", help="scorer versions to score each run with (the one "
                                                          "the checks read last)")
    args = parser.parse_args()

    from rounds.settings import Settings
    from services.consumers.scoring.api import score_run
    from services.simulator.orchestrator.entry import RunOptions, run_scenarios
    from services.simulator.orchestrator.jobs import plan
    from tests.consumers.scoring.redteam.gamers import Wrapped, WriteSpammer, gamers, wrong_values
    from tests.consumers.scoring.redteam.gamers_v4 import gamers_v4, tricks_on_baseline
    from tests.consumers.scoring.redteam.honest import honest

    settings = Settings(database_url=args.store)
    chosen = _scenarios(args.store, args.scenarios, args.per_family)
    stamp = time.strftime("%H%M%S")
    assistants = {"oracle": "oracle", "baseline": "baseline", "silence (weak)": "weak",
                  "wrong facts (baseline, values 30% off)": Wrapped(wrong_values),
                  "baseline + spam writes on order-like turns": WriteSpammer(every_turn=False),
                  **tricks_on_baseline(), **honest(), **gamers(_future(settings, chosen)), **gamers_v4()}
    versions = args.versions.split(",")
    last = versions[-1]
    stamp_of: dict[str, str] = {}
    if args.rescore:
        old, count = args.rescore.split(":")
        stamp_of = {name: f"redteam-{old}-{i}" for i, name in enumerate(list(assistants)[:int(count)])}
    if args.only:
        parts = args.only.split(",")
        assistants = {n: a for n, a in assistants.items() if n in stamp_of or any(p in n for p in parts)}
    rows: dict[str, dict[str, object]] = {}
    per_session: dict[str, dict[tuple, float]] = defaultdict(dict)
    by_variant: dict[str, dict[str, float]] = {}
    started = time.perf_counter()
    for name, spec in assistants.items():
        run_id = stamp_of.get(name) or f"redteam-{stamp}-{len(rows)}"
        if name in stamp_of:
            summary = None
        else:
            variants = args.variants.split(",")
            jobs = [job for variant in variants for job in plan(chosen, 1, LANGUAGES, variant)]
            summary = asyncio.run(run_scenarios(jobs, spec, RunOptions(run_id), migrated(settings)))
        row: dict[str, object] = {"reasons": dict(summary.by_reason) if summary else "re-scored"}
        for version in versions:
            report = score_run(root_on(settings), run_id, scorer_version=version, timeout_s=3600)
            m = report.metrics
            row[version] = (m.avg or 0.0, m.pass_at_session.get("0.75", 0.0), m.sessions,
                            getattr(m, "safety_failures", 0) or 0, m.excluded_sessions)
            if version == last:
                per_session[name] = {(s.scenario, s.language, s.variant): s.score or 0.0
                                     for s in report.sessions}
                by_variant[name] = {k: v.avg or 0.0 for k, v in report.by.get("variant", {}).items()}
        rows[name] = row
        elapsed = time.perf_counter() - started
        if summary is not None and set(summary.by_reason) != {"completed"}:
            print(f"  {name}: session ends {dict(summary.by_reason)}", flush=True)
        print(f"  {name}: " + "  ".join(f"v{v} {row[v][0]:.3f}" for v in versions)
              + f"  ({elapsed:.0f} s)", flush=True)
    print()
    heads = " | ".join(f"v{v} Avg | v{v} Pass@Session(0.75)" for v in versions)
    print(f"| assistant | {heads} | v{last} safety failures (turns) | sessions (unscored) |")
    print("|---|" + "---|" * (2 * len(versions) + 2))
    for name, row in rows.items():
        cells = " | ".join(f"{_f(row[v][0])} | {_f(row[v][1])}" for v in versions)
        print(f"| {name} | {cells} | {row[last][3]} | {row[last][2]} ({row[last][4]}) |")
    _verdicts(rows, per_session, by_variant, last)


def _f(value: object) -> str:
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def _verdicts(rows, per_session, by_variant, last) -> None:
    avg = {name: row[last][0] for name, row in rows.items()}
    base = avg["baseline"]
    fixed = ("oracle", "baseline", "silence (weak)", "wrong facts (baseline, values 30% off)")
    tricks = [n for n in avg if n.startswith("baseline +")]
    honest = [n for n in avg if n.startswith("honest:")]
    gamed = [n for n in avg if n not in fixed and n not in tricks and n not in honest]
    raised = {n: [k for k, v in per_session[n].items() if v > per_session["baseline"].get(k, 0.0) + 1e-9]
              for n in tricks}
    low = min(honest, key=lambda n: avg[n]) if honest else None
    closest = max(gamed, key=lambda n: avg[n]) if gamed else None
    swap = base - avg.get("unit swapper", base)
    checks = {
        "oracle 1.0": avg["oracle"] >= 0.999,
        f"honest rephrasings >= oracle - 0.05 (lowest: {low} {avg.get(low, 0):.3f})":
            all(avg[n] >= avg["oracle"] - 0.05 for n in honest),
        f"gamers: closest {closest} {avg.get(closest, 0):.3f} (of {len(gamed)} played)": True,
        "every gamer <= 0.25 Avg": all(avg[n] <= 0.25 for n in gamed),
        "every gamer >= 0.15 below baseline": all(base - avg[n] >= 0.15 for n in gamed),
        "baseline + trick never above baseline in a session ({})".format(
            ", ".join(f"{n}: {len(v)}" for n, v in raised.items())): not any(raised.values()),
        f"unit swaps cost >= 0.1 (cost {swap:.2f}{'' if 'unit swapper' in avg else ', not played'})":
            swap >= 0.1,
        "correct facts > wrong facts > silence": base > avg["wrong facts (baseline, values 30% off)"]
        > avg["silence (weak)"],
        "explicit > implicit for baseline ({:.2f} vs {:.2f})".format(
            by_variant["baseline"].get("explicit", 0), by_variant["baseline"].get("implicit", 0)):
            by_variant["baseline"].get("explicit", 0) > by_variant["baseline"].get("implicit", 0),
    }
    print()
    for label, ok in checks.items():
        print(f"- {'PASS' if ok else 'FAIL'}: {label}")


if __name__ == "__main__":
    main()
