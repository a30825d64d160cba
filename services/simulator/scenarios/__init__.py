"""Scenario builder: record-grounded multi-turn sessions with machine-checkable truth, EN + ZH,
explicit + implicit, built from any FHIR R4 server holding MIMIC-on-FHIR-shaped data.

Entry points: `build_scenarios(source, seed, sessions, families)` (tests, other components) and
`rounds scenarios build|show` (cli.py). Families are data (data/families/*.json) run by one engine
(engine.py); the line format is contracts/scenario.py, documented in docs/scenarios.md."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from contracts.scenario import Scenario
from rounds.shards import ALL, Shard
from services.simulator.scenarios.builder import BuildError, check_families, read_record, select, summarize
from services.simulator.scenarios.parts import Part

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
    check_families(families)  # before the (long) read
    part = await read_part_async(source, ALL, timeout)
    return build_from(part, seed, sessions, families, per_category)


async def read_part_async(source: Any, shard: Shard, timeout: float = DEFAULT_TIMEOUT) -> Part:
    """The charts of `shard`'s patients (the costly part of a build, split over machines: parts.py)."""
    async with fhir_client(source, timeout) as client:
        charts, skipped = await read_record(client, shard)
        return Part(str(shard), str(client.base_url), charts, skipped)


def build_from(
    part: Part,
    seed: int = 0,
    sessions: int = DEFAULT_SESSIONS,
    families: list[str] | None = None,
    per_category: int = DEFAULT_PER_CATEGORY,
) -> Build:
    """The sessions selected from charts already read (one process's, or the union of shards' parts)."""
    check_families(families)
    charts, skipped = part.charts, part.skipped
    if not charts:
        first = skipped[0]["reason"] if skipped else "no patients"
        raise BuildError(f"every patient's chart failed to read; first: {first}")
    scenarios, stats, shortfall = select(charts, seed, sessions, families, per_category)
    if not scenarios:
        raise BuildError(
            "no patient qualified for any selected family; see the skipped patients: "
            + "; ".join(f"{s['patient']}: {s['reason']}" for s in skipped[:5])
        )
    return Build(scenarios, summarize(scenarios, stats, shortfall, charts, skipped, seed, part.base))


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
    "Part",
    "build_async",
    "build_from",
    "build_scenarios",
    "fhir_client",
    "read_part_async",
]
