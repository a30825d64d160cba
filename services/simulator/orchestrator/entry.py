"""The one entry point the CLI, tests and benchmarks share: open the bus and the FHIR environment, run, close.

`run_scenarios` wires what a run needs from configuration: the bus (ROUNDS_BUS: SQL log or Kafka), the
per-session sequence counter in the application database, the FHIR server (embedded in this process, served on
a loopback port when the assistant lives in another process, or a separate `rounds serve` given by
`fhir_base`), then hands the jobs to `run.execute`.

Before anything is opened the assistant's endpoint is proven (`preflight`, for the adapters that have one): a
run against an endpoint that cannot serve it stops with `EndpointUnavailable` instead of failing every
session. Options left unset take the defaults of the assistant's endpoint profile (`local`: a model server on
this machine or a private network; `hosted`: anything else — assistants/data/endpoint_profiles.json).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from events.sequences import SessionSequences
from rounds.wiring import Wiring
from services.fhir_api.auth import endpoint_auth, service_headers
from services.simulator.assistant_protocol import Assistant
from services.simulator.assistants.endpoint import profiles
from services.simulator.assistants.registry import create_assistant, needs_network
from services.simulator.orchestrator import environment
from services.simulator.orchestrator.jobs import RunSummary, execute
from services.simulator.orchestrator.session_loop import (
    SessionJob,
    SessionOutcome,
    SessionSettings,
    TurnProgress,
)


@dataclass
class RunOptions:
    run_id: str
    concurrency: int | None = None  # None: the endpoint profile's
    fhir_base: str | None = None  # a separate `rounds serve` (its root); None: the FHIR app in this process
    turn_timeout_s: float | None = None  # None: the endpoint profile's
    max_steps: int = 8
    seed: int = 0
    resume: bool = True
    replay_of: str | None = None
    causation: dict[str, str] | None = None
    network: bool | None = None  # force a real server even for in-process assistants (tests)
    voice: object = None
    max_tokens: int | None = None  # per model call (adapters that call a model); None: the profile's
    model_timeout_s: float | None = None  # per model call; None: the profile's
    retry_failed: bool = False  # a rerun also reruns contracts/end_reasons.py RETRIED
    accept_changed_options: bool = False  # a rerun may change the recorded options
    preflight: bool = True
    any_model_name: bool = False  # the model server routes any name itself: no pre-flight list check
    on_turn: Callable[[TurnProgress], None] | None = None


def resolved(options: RunOptions, assistant: Assistant) -> RunOptions:
    """`options` with what was left unset taken from the assistant's endpoint profile; the model limits
    handed to the adapter."""
    defaults = profiles()[getattr(assistant, "profile", "hosted")]
    configure = getattr(assistant, "configure", None)
    if configure is not None:
        configure(max_tokens=options.max_tokens, model_timeout_s=options.model_timeout_s,
                  **({"any_model_name": True} if options.any_model_name else {}))
    return replace(options,
                   concurrency=options.concurrency or defaults["concurrency"],
                   turn_timeout_s=options.turn_timeout_s or defaults["turn_timeout_s"])


def recorded_options(options: RunOptions, assistant: Assistant) -> dict:
    """What the run records about itself (`runOptions`) and holds a rerun to: the assistant and its limits."""
    limits = getattr(assistant, "limits", None)
    return {"assistant": getattr(assistant, "spec", type(assistant).__name__), "maxSteps": options.max_steps,
            "turnTimeoutS": options.turn_timeout_s, "seed": options.seed, **(limits() if limits else {})}


async def run_scenarios(jobs: list[SessionJob], assistant: Assistant | str, options: RunOptions,
                        wiring: Wiring,
                        progress: Callable[[SessionOutcome], None] | None = None) -> RunSummary:
    """Run `jobs` on the process's `wiring` (its settings, its one engine and bus: the SQL log, the sequence
    counters and the in-process FHIR store all on that engine; the root closes them, not the run)."""
    settings = wiring.settings
    if isinstance(assistant, str):
        assistant = create_assistant(assistant, settings.openai_api_key)
    options = resolved(options, assistant)
    env = None
    try:
        endpoint = None
        check = getattr(assistant, "preflight", None) if options.preflight else None
        if check is not None:
            endpoint = await check()  # EndpointUnavailable: nothing opened, nothing recorded
        bus, engine = wiring.bus(ensure_topics=True), wiring.engine()
        network = needs_network(assistant) if options.network is None else options.network
        mcp = str(getattr(assistant, "spec", "")).startswith("mcp")
        if options.fhir_base:
            env = await environment.remote(options.fhir_base, settings, network=network, mcp=mcp,
                                           headers=service_headers(settings, engine),
                                           auth=endpoint_auth(settings, engine))
        else:
            env = await environment.embedded(settings, engine, bus, wiring.backbone(), network=network,
                                             mcp=mcp)
        session_settings = SessionSettings(
            run_id=options.run_id, assistant_spec=getattr(assistant, "spec", type(assistant).__name__),
            seed=options.seed, max_steps=options.max_steps, turn_timeout_s=options.turn_timeout_s,
            replay_of=options.replay_of, causation=options.causation or {}, voice=options.voice,
            run_options=recorded_options(options, assistant), on_turn=options.on_turn,
        )
        summary = await execute(env, bus, SessionSequences(engine), assistant, jobs, session_settings,
                                concurrency=options.concurrency, resume=options.resume,
                                retry_failed=options.retry_failed,
                                accept_changed_options=options.accept_changed_options, progress=progress)
        summary.endpoint = endpoint
        return summary
    finally:
        try:
            await assistant.aclose()
        finally:
            if env is not None:
                await env.close()
