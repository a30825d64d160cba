"""The one entry point the CLI, tests and benchmarks share: open the bus and the FHIR environment, run, close.

`run_scenarios` wires what a run needs from configuration: the bus (ROUNDS_BUS: SQL log or Kafka), the
per-session sequence counter in the application database, the FHIR server (embedded in this process, served on
a loopback port when the assistant lives in another process, or a separate `rounds serve` given by
`fhir_base`), then hands the jobs to `run.execute`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from events.factory import open_bus
from events.sequences import SessionSequences
from rounds.db import make_engine
from rounds.settings import Settings, get_settings
from services.fhir_api.auth import endpoint_auth, service_headers
from services.simulator.assistants.registry import create_assistant, needs_network
from services.simulator.data_model import Assistant
from services.simulator.orchestrator import environment
from services.simulator.orchestrator.run import RunSummary, execute
from services.simulator.orchestrator.session import SessionJob, SessionOutcome, SessionSettings


@dataclass
class RunOptions:
    run_id: str
    concurrency: int = 8
    fhir_base: str | None = None  # a separate `rounds serve` (its root); None: the FHIR app in this process
    turn_timeout_s: float = 120.0
    max_steps: int = 8
    seed: int = 0
    resume: bool = True
    replay_of: str | None = None
    causation: dict[str, str] | None = None
    network: bool | None = None  # force a real server even for in-process assistants (tests)
    voice: object = None


async def run_scenarios(jobs: list[SessionJob], assistant: Assistant | str, options: RunOptions,
                        settings: Settings | None = None,
                        progress: Callable[[SessionOutcome], None] | None = None) -> RunSummary:
    settings = settings or get_settings()
    from rounds.migrate import upgrade

    upgrade(settings.database_url)  # the SQL log and the sequence counters live in the application database
    if isinstance(assistant, str):
        assistant = create_assistant(assistant)
    bus = open_bus(settings, ensure_topics=True)
    engine = make_engine(settings.database_url)
    network = needs_network(assistant) if options.network is None else options.network
    env = None
    try:
        mcp = str(getattr(assistant, "spec", "")).startswith("mcp")
        if options.fhir_base:
            env = await environment.remote(options.fhir_base, network=network, mcp=mcp,
                                           headers=service_headers(settings), auth=endpoint_auth(settings))
        else:
            env = await environment.embedded(settings, bus, network=network, mcp=mcp)
        session_settings = SessionSettings(
            run_id=options.run_id, assistant_spec=getattr(assistant, "spec", type(assistant).__name__),
            seed=options.seed, max_steps=options.max_steps, turn_timeout_s=options.turn_timeout_s,
            replay_of=options.replay_of, causation=options.causation or {}, voice=options.voice,
        )
        return await execute(env, bus, SessionSequences(engine), assistant, jobs, session_settings,
                             concurrency=options.concurrency, resume=options.resume, progress=progress)
    finally:
        try:
            await assistant.aclose()
        finally:
            if env is not None:
                await env.close()
            bus.close()
            engine.dispose()
