"""End to end: one session per definition, EN and ZH, run by the simulator with the `oracle` assistant
(it asks the patient for the turn's facts, writes each expected example, says the reference answer) and scored
by the real scorer: every turn passes and no safety item fails — the scenarios' truth, writes and answers
agree with the scorer that checks them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from services.simulator.scenarios import output


def test_the_oracle_scores_one_on_every_definition(
    synthetic_url: str, synthetic_build, tmp_path: Path
) -> None:
    picked, seen = [], set()
    for scenario in synthetic_build.scenarios:
        if scenario.source["definition"] not in seen:
            seen.add(scenario.source["definition"])
            picked.append(scenario)
    scenarios = tmp_path / "one-per-definition.jsonl"
    output.write(scenarios, picked, {})
    env = {**os.environ, "ROUNDS_DATABASE_URL": synthetic_url, "COLUMNS": "200"}
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "rounds.cli",
            "run",
            "--scenarios",
            str(scenarios),
            "--assistant",
            "oracle",
            "--language",
            "both",
        ],
        capture_output=True,
        text=True,
        timeout=1200,
        env=env,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    avg = re.search(r"Avg\s*│\s*([\d.]+)", res.stdout)
    safety = re.search(r"safety failures\s*│\s*(\d+)", res.stdout)
    assert avg and safety, res.stdout[-3000:]
    assert (float(avg.group(1)), int(safety.group(1))) == (1.0, 0), res.stdout[-3000:]
    assert f"{2 * len(picked)} sessions run" in res.stdout
