"""Inspect's hooks that end Rounds runs: when an eval with Rounds sessions ends, its Rounds run is closed and
scored (runs.py). Inspect skips its task-end hook when an eval fails (a sample error with the default
`fail_on_error`), so the run-end hook ends whatever that Inspect run left open. Other evals in the same
process are not Rounds runs and are left alone."""

from __future__ import annotations

from inspect_ai.hooks import Hooks, RunEnd, TaskEnd, hooks
from rich.console import Console

from rounds.inspect.runs import RUNS


@hooks(name="rounds_run_end", description="Closes an eval's Rounds run and scores it into Rounds' log")
class RoundsRunEnd(Hooks):
    async def on_task_end(self, data: TaskEnd) -> None:
        if data.eval_id in RUNS.open:
            await _finish(data.eval_id)

    async def on_run_end(self, data: RunEnd) -> None:
        for eval_id in [e for e, r in RUNS.open.items() if r.inspect_run == data.run_id]:
            await _finish(eval_id)


async def _finish(eval_id: str) -> None:
    report = await RUNS.finish(eval_id)
    if report is not None:
        Console(stderr=True).print(
            f"Rounds run {report.run}: {report.metrics.sessions} sessions scored, "
            f"{report.metrics.excluded_sessions} excluded (rounds report --run {report.run})")
