"""The builder is a real FHIR client: over HTTP (uvicorn on a loopback port, as `--fhir-base URL` reaches any
FHIR R4 server) it builds byte for byte what it builds in-process from the same record and seed: the same
scenario and summary files, but for the base URL the summary names."""

from __future__ import annotations

import asyncio

from services.simulator.orchestrator.environment import serve_in_loop
from services.simulator.scenarios import build_async, output


def test_a_build_over_http_equals_the_in_process_one(synthetic_app, synthetic_build, tmp_path) -> None:
    async def over_http():
        root, server, task = await serve_in_loop(synthetic_app)
        try:
            return await build_async(f"{root}/fhir", seed=11)
        finally:
            server.should_exit = True
            await task

    remote = asyncio.run(over_http())
    assert remote.summary["fhir_base"].startswith("http://127.0.0.1:")
    written = {}
    for name, build in (("remote", remote), ("local", synthetic_build)):
        output.write(tmp_path / f"{name}.jsonl", build.scenarios, build.summary | {"fhir_base": "-"})
        written[name] = [(tmp_path / f"{name}{end}").read_bytes() for end in (".jsonl", ".summary.json")]
    assert written["remote"] == written["local"]
    assert len(remote.scenarios) == remote.summary["sessions"] > 100
