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
from services.simulator.scenarios.builder import BuildError, check_families, read_record, select, summarize

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
    async with fhir_client(source, timeout) as client:
        charts, skipped = await read_record(client)
        base = str(client.base_url)
    scenarios, stats, shortfall = select(charts, seed, sessions, families, per_category)
    if not scenarios:
        raise BuildError(
            "no patient qualified for any selected family; see the skipped patients: "
            + "; ".join(f"{s['patient']}: {s['reason']}" for s in skipped[:5])
        )
    return Build(scenarios, summarize(scenarios, stats, shortfall, charts, skipped, seed, base))


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


__all__ = ["Build", "BuildError", "build_async", "build_scenarios", "fhir_client"]
