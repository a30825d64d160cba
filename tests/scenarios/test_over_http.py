"""The builder is a real FHIR client: over HTTP (uvicorn on a loopback port, as `--fhir-base URL` reaches any
FHIR R4 server) it builds byte for byte what it builds in-process from the same record and seed."""

from __future__ import annotations

import asyncio

from services.simulator.orchestrator.environment import serve_in_loop
from services.simulator.scenarios import build_async, output


def test_a_build_over_http_equals_the_in_process_one(synthetic_app, synthetic_build) -> None:
    async def over_http():
        root, server, task = await serve_in_loop(synthetic_app)
        try:
            return await build_async(f"{root}/fhir", seed=11)
        finally:
            server.should_exit = True
            await task

    remote = asyncio.run(over_http())
    assert [output.line(s) for s in remote.scenarios] == [output.line(s) for s in synthetic_build.scenarios]
    assert remote.summary["fhir_base"].startswith("http://127.0.0.1:")
    assert {k: v for k, v in remote.summary.items() if k != "fhir_base"} == {
        k: v for k, v in synthetic_build.summary.items() if k != "fhir_base"
    }
