"""`inspect score` re-scores an Inspect log of the task with Rounds' current scorer, from Rounds' log; the
task also runs by its file path (`rounds/inspect/task.py@physassist`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai import score as inspect_score
from inspect_ai.log import read_eval_log

from rounds.inspect.scorer import rounds_scorer
from services.consumers.scoring import scorer
from tests.rounds.inspect.policy import scripted
from tests.rounds.inspect.test_registration import REPO, installed_entry_point

pytestmark = pytest.mark.slow  # each runs an Inspect eval (a few seconds)


def quality(scenario, turn):  # the lookup and reasoning turns answered vaguely: scores between 0 and 1
    return "vague" if turn % 2 == 0 else "reference"


def evaluate(scenario_file, models):
    task = f"{REPO / 'rounds/inspect/task.py'}@physassist"
    [log] = inspect_eval(task, task_args={"scenarios": str(scenario_file), "language": "both"},
                         model="mockllm/model", model_args={"custom_outputs": scripted(models, quality)},
                         display="none")
    assert log.status == "success", log.error
    return log


def scores(log) -> dict[str, float]:
    return {s.id: s.scores["rounds_scorer"].value for s in log.samples}


def test_a_rescore_from_rounds_log_by_the_api_and_by_inspect_score(rounds_db, scenario_file, scenario_models,
                                                                   monkeypatch, tmp_path: Path):
    """`inspect_ai.score` with the scorer version current then; `inspect score` on the command line (Inspect
    records a scorer by its unqualified name, which it finds again only in the task's own file: a package's
    scorer is named, `--scorer rounds/rounds_scorer`, found through the entry point; ROUNDS_DATABASE_URL says
    where Rounds' log is)."""
    log = evaluate(scenario_file, scenario_models)
    first = scores(log)
    assert all(0 < value < 1 for value in first.values()), first
    site = installed_entry_point(tmp_path / "site")
    out = tmp_path / "rescored.eval"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    done = subprocess.run([sys.executable, "-m", "inspect_ai", "score", log.location, "--scorer",
                           "rounds/rounds_scorer", "--action", "overwrite", "--output-file", str(out),
                           "--display", "none"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rescored = read_eval_log(str(out))
    assert scores(rescored) == first
    assert rescored.results.scores[0].metrics["avg"].value == log.results.scores[0].metrics["avg"].value
    monkeypatch.setattr(scorer, "SCORER_VERSION", "99-test")
    again = inspect_score(log, [rounds_scorer()], action="overwrite", display="none")
    assert scores(again) == first  # same log, same checks: the same scores
    assert {s.scores["rounds_scorer"].metadata["scorer_version"] for s in again.samples} == {"99-test"}
