"""Inspect's task-end hook: when an eval with Rounds sessions ends, its Rounds run is closed and scored
(runs.py). Other evals in the same process are not Rounds runs and are left alone."""

from __future__ import annotations

import logging

from inspect_ai.hooks import Hooks, TaskEnd, hooks

from rounds.inspect.runs import RUNS

log = logging.getLogger(__name__)


@hooks(name="rounds_run_end", description="Closes an eval's Rounds run and scores it into Rounds' log")
class RoundsRunEnd(Hooks):
    async def on_task_end(self, data: TaskEnd) -> None:
        if data.eval_id in RUNS.open:
            report = await RUNS.finish(data.eval_id)
            if report is not None:
                log.info("Rounds run %s scored: %d sessions (rounds report --run %s)", data.eval_id,
                         report.metrics.sessions, data.eval_id)
