"""What an Inspect eval's Rounds sessions share, opened at its first sample and closed when its task ends.

A Rounds run is one Inspect eval: its id is the eval's `eval_id` (one task × one model; Inspect's `run_id`
would put every model of `inspect eval --model a,b` in one Rounds run), or the task's `run_id` argument when
given (a name to pass to `rounds report --run`, as `rounds run --run-id` takes one). The eval's samples
share the run's bus, per-session sequence counter and simulator log, and one FHIR environment: the embedded
FHIR app in this process on ROUNDS_DATABASE_URL (its EHR calls recorded into the same log), or a running
`rounds serve` given as the task's `fhir_base`. When the eval ends (hooks.py) the run is scored the way
`rounds run` scores its runs (`score_run`: score rows per scorer version and `rounds.score.*` on the log, so
`rounds report --run RUN` shows it) and its resources are closed.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

import anyio
from sqlalchemy import Engine

from events.bus import Bus
from rounds.root import Root
from rounds.settings import Settings
from services.simulator.orchestrator.environment import FhirEnvironment
from services.simulator.orchestrator.log import SessionRecorder

log = logging.getLogger(__name__)


@dataclass
class RoundsRun:
    run_id: str  # the Rounds run id its sessions are recorded under
    eval_id: str  # the Inspect eval whose samples they are
    root: Root  # the run's wiring: its engine, bus and settings
    env: FhirEnvironment
    log: SessionRecorder
    loop: asyncio.AbstractEventLoop
    inspect_run: str | None = None  # the Inspect run (one `inspect eval`) the eval belongs to
    sessions: int = 0

    @property
    def settings(self) -> Settings:
        return self.root.settings

    @property
    def bus(self) -> Bus:
        return self.root.bus()

    @property
    def engine(self) -> Engine:
        return self.root.engine()

    async def close(self) -> None:
        """Close the FHIR environment; the root (bus, engine) stays open for the run's scoring."""
        await self.env.close()


@dataclass
class Runs:
    """The process's open runs by Inspect eval id (one per eval in progress)."""

    open: dict[str, RoundsRun] = field(default_factory=dict)
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)

    async def get(self, eval_id: str, run_id: str, settings: Settings, fhir_base: str | None,
                  inspect_run: str | None = None) -> RoundsRun:
        loop = asyncio.get_running_loop()
        lock = self._locks.setdefault(eval_id, asyncio.Lock())
        async with lock:
            run = self.open.get(eval_id)
            if run is not None and run.loop is loop:
                return run
            run = await _open(run_id, eval_id, settings, fhir_base, loop)
            run.inspect_run = inspect_run
            self.open[eval_id] = run
            return run

    async def finish(self, eval_id: str, *, score: bool = True) -> Any:
        """Close the eval's run resources; score the run (stored and published) when it had sessions."""
        run = self.open.pop(eval_id, None)
        self._locks.pop(eval_id, None)
        if run is None:
            return None
        try:
            await run.close()
        finally:
            from rounds.inspect.scoring import close_reading

            close_reading(run.settings)
            report = None
            if score and run.sessions:
                from services.consumers.scoring.api import score_run

                try:
                    report = await anyio.to_thread.run_sync(lambda: score_run(run.root, run.run_id))
                finally:
                    run.root.close()
            else:
                run.root.close()
        return report


async def _open(run_id: str, eval_id: str, settings: Settings, fhir_base: str | None,
                loop: asyncio.AbstractEventLoop) -> RoundsRun:
    from events.sequences import SessionSequences
    from services.fhir_api.auth import endpoint_auth, service_headers
    from services.simulator.orchestrator import environment

    root = Root(settings)
    await anyio.to_thread.run_sync(root.upgrade)
    bus, engine = root.bus(ensure_topics=True), root.engine()
    try:
        if fhir_base:
            env = await environment.remote(fhir_base, settings, headers=service_headers(settings, engine),
                                           auth=endpoint_auth(settings, engine))
        else:
            env = await environment.embedded(settings, engine, bus, root.backbone())
    except BaseException:
        root.close()
        raise
    return RoundsRun(run_id, eval_id, root, env, SessionRecorder(bus, SessionSequences(engine)), loop)


RUNS = Runs()
