"""`rounds/physassist`: Rounds' benchmark sessions as an Inspect AI task.

    inspect eval rounds/physassist --model openai/gpt-4o-mini -T scenarios=rounds-demo/scenarios.jsonl

One sample is one Rounds session (dataset.py), run by Rounds' session loop with the eval's model as the
assistant (solver.py), scored by Rounds' scorer (scorer.py). Task arguments (`-T`): `scenarios` (a Rounds
scenario file; default what `rounds demo` leaves), `language` (en | zh | both), `variant` (implicit |
explicit), `families` (comma-separated), `limit` (the first N scenarios), `fhir_base` (a running `rounds
serve`; default the embedded FHIR app on ROUNDS_DATABASE_URL), `max_steps` (tool steps per turn),
`turn_timeout` (seconds per turn), `run_id` (the Rounds run id; default the Inspect eval's id). Inspect's
own limits (`--message-limit`, `--token-limit`, `--time-limit`, ...) end a session the way limits.py says.
"""

from __future__ import annotations

from pathlib import Path

from inspect_ai import Epochs, Task, task

from rounds.inspect import hooks  # noqa: F401 - registers the task-end hook that scores the Rounds run
from rounds.inspect.dataset import dataset, load_jobs, selection
from rounds.inspect.scorer import rounds_scorer, rounds_trials
from rounds.inspect.solver import rounds_session
from rounds.settings import Settings


@task
def physassist(scenarios: str | None = None, language: str = "en", variant: str = "implicit",
               families: str | None = None, limit: int | None = None, fhir_base: str | None = None,
               max_steps: int = 8, turn_timeout: float = 120.0, run_id: str | None = None) -> Task:
    chosen = selection(scenarios, language, variant, families, limit)
    jobs = load_jobs(chosen)
    settings = Settings()
    root = fhir_base.rstrip("/").removesuffix("/fhir") if fhir_base else None
    if root:
        settings = settings.model_copy(update={"fhir_base": root})
    return Task(
        dataset=dataset(jobs, str(chosen.scenarios)),
        solver=rounds_session(str(chosen.scenarios), language, variant, families, limit, root,
                              int(max_steps), float(turn_timeout), run_id),
        scorer=rounds_scorer(settings.database_url, settings.fhir_base),
        epochs=Epochs(1, rounds_trials()),  # `--epochs N` keeps this reducer: N trials, each session counted
        metadata={"rounds_scenarios": str(Path(chosen.scenarios).resolve()),
                  "rounds_database_url": settings.database_url},
    )
