"""Scenario builder: record-grounded multi-turn sessions with machine-checkable truth, EN + ZH,
explicit + implicit, built from any FHIR R4 server holding MIMIC-on-FHIR-shaped data.

Entry points: `build_scenarios(source, seed, sessions, families)` (tests, other components) and
`rounds scenarios build|show` (cli.py). Families are data (data/families/*.json) run by one engine
(engine.py); the line format is contracts/scenario.py, documented in docs/scenarios.md."""

from __future__ import annotations

import asyncio
import tempfile
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from contracts.scenario import Scenario
from rounds.shards import ALL, Shard
from services.simulator.scenarios.builder import BuildError, check_families, definitions_of, select, summarize
from services.simulator.scenarios.parts import stream_into, write_part
from services.simulator.scenarios.proposals import Proposals, Streamed

LOCAL_BASE = "http://rounds.local/fhir"
DEFAULT_SESSIONS = 324
DEFAULT_PER_CATEGORY = 30
DEFAULT_TIMEOUT = 120.0


@dataclass
class Build:
    scenarios: list[Scenario]
    summary: dict[str, Any]


@asynccontextmanager
async def fhir_client(source: Any, timeout: float = DEFAULT_TIMEOUT):
    """An AsyncClient on a FHIR base: `source` is a base URL (requests time out after `timeout` s), an
    httpx.AsyncClient (used as is), an ASGI app (Rounds' `create_app()`, served in-process: no timeout, a busy
    machine must not change what is built) or a Starlette TestClient (its app)."""
    if isinstance(source, httpx.AsyncClient):
        yield source
        return
    if isinstance(source, str):
        async with httpx.AsyncClient(base_url=source.rstrip("/") + "/", timeout=timeout) as client:
            yield client
        return
    app = getattr(source, "app", source)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=LOCAL_BASE + "/", timeout=None) as client:
        yield client


async def build_async(
    source: Any,
    seed: int = 0,
    sessions: int = DEFAULT_SESSIONS,
    families: list[str] | None = None,
    per_category: int = DEFAULT_PER_CATEGORY,
    timeout: float = DEFAULT_TIMEOUT,
) -> Build:
    """Stream the record's charts into a temporary spool (TMPDIR), proposing their moments, then select."""
    proposals = Proposals(definitions_of(families))  # checks the families before the (long) read
    with tempfile.TemporaryDirectory(prefix="rounds-charts-") as tmp:
        async with fhir_client(source, timeout) as client:
            streamed = await stream_into(client, Path(tmp) / "charts.spool", ALL, proposals)
        return build_from(streamed, seed, sessions, families, per_category)


async def write_part_async(
    source: Any, shard: Shard, out: Path, timeout: float = DEFAULT_TIMEOUT
) -> Streamed:
    """The part file of `shard`'s charts (the costly part of a build, split over machines: parts.py)."""
    async with fhir_client(source, timeout) as client:
        return await write_part(client, out, shard)


def build_from(
    streamed: Streamed,
    seed: int = 0,
    sessions: int = DEFAULT_SESSIONS,
    families: list[str] | None = None,
    per_category: int = DEFAULT_PER_CATEGORY,
) -> Build:
    """The sessions selected from a streamed record (one process's spool, or the union of shards' parts);
    the spools are closed after."""
    try:
        check_families(families)
        if not streamed.read:
            first = streamed.skipped[0]["reason"] if streamed.skipped else "no patients"
            raise BuildError(f"every patient's chart failed to read; first: {first}")
        scenarios, stats, shortfall = select(streamed.proposals, streamed.shelf, seed, sessions, families,
                                             per_category)
    finally:
        streamed.shelf.close()
    if not scenarios:
        raise BuildError(
            "no patient qualified for any selected family; see the skipped patients: "
            + "; ".join(f"{s['patient']}: {s['reason']}" for s in streamed.skipped[:5])
        )
    summary = summarize(scenarios, stats, shortfall, streamed.read, streamed.skipped, seed, streamed.base)
    return Build(scenarios, summary)


def build_scenarios(
    source: Any,
    seed: int = 0,
    sessions: int = DEFAULT_SESSIONS,
    families: list[str] | None = None,
    per_category: int = DEFAULT_PER_CATEGORY,
) -> list[Scenario]:
    """Scenarios from a FHIR record (see `fhir_client` for `source`); blocking. In a running event loop use
    `build_async`."""
    return asyncio.run(build_async(source, seed, sessions, families, per_category)).scenarios


__all__ = [
    "Build",
    "BuildError",
    "Streamed",
    "build_async",
    "build_from",
    "build_scenarios",
    "fhir_client",
    "write_part_async",
]
