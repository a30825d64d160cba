"""The README's three jobs run as written, in a fresh folder after `rounds demo`, with a `rounds` on PATH that
is this checkout; the OpenAI-compatible endpoint of job 1 is a local server this test starts (no model is ever
contacted)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.simulator.adapters.conftest import Served, free_port
from tests.simulator.adapters.fake_openai import FakeOpenAI, text, tool_call

pytestmark = pytest.mark.slow  # whole pipelines, subprocesses or real services: not in the fast lane

REPO = Path(__file__).resolve().parents[3]
BLOCK = re.compile(r"<!-- readme-job: (?P<job>[a-z]+) -->\n```(?P<lang>\w+)\n(?P<code>.*?)```", re.S)


def readme_jobs() -> dict[str, tuple[str, str]]:
    return {m["job"]: (m["lang"], m["code"]) for m in BLOCK.finditer((REPO / "README.md").read_text())}


@pytest.fixture(scope="module")
def demo_cli(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, subprocess.CompletedProcess]:
    """A user's folder after `rounds demo`, the environment of a user's shell (no ROUNDS_* set), and what
    `rounds demo` printed."""
    home = tmp_path_factory.mktemp("user")
    bin_dir = home / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "rounds"
    shim.write_text(f'#!/bin/sh\nPYTHONPATH="{REPO}" exec "{sys.executable}" -m rounds.cli "$@"\n')
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROUNDS_", "OPENAI_"))}
    env |= {"PATH": f"{bin_dir}:{env['PATH']}", "PYTHONPATH": str(REPO), "COLUMNS": "120"}
    demo = subprocess.run(
        ["rounds", "demo", "--patients", "2", "--sessions", "4"],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert (home / "rounds-demo" / "scenarios.jsonl").exists() and (home / "rounds.sqlite").exists()
    return home, env, demo


@pytest.fixture(scope="module")
def folder(demo_cli) -> tuple[Path, dict[str, str]]:
    return demo_cli[0], demo_cli[1]


def test_rounds_demo_prints_the_results_table_and_the_report_path(demo_cli) -> None:
    home, _, demo = demo_cli
    for name in ("baseline", "oracle", "weak", "Avg", "P@Sess"):
        assert name in demo.stdout
    assert f"report: {(home / 'rounds-demo' / 'report.html').resolve()}" in demo.stdout.replace("\n", "")
    assert (home / "rounds-demo" / "report.html").exists()
    assert "Warning" not in demo.stdout + demo.stderr  # no library noise


def run_block(job: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    lang, code = readme_jobs()[job]
    command = ["bash", "-euo", "pipefail", "-c", code] if lang == "bash" else [sys.executable, "-c", code]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_the_readme_names_the_three_jobs() -> None:
    assert set(readme_jobs()) == {"assistant", "rescore", "connector"}


def test_job_1_an_openai_compatible_assistant(folder) -> None:
    home, env = folder
    fake = FakeOpenAI()

    def step(body: dict) -> tuple:  # look something up, then answer with what came back
        last = body["messages"][-1]
        if last["role"] == "tool":
            return text(fake, f"Here is what the record shows: {last['content'][:200]}")
        return tool_call(fake, "fhir_search", {"resourceType": "Observation", "params": {"_count": "3"}})

    fake.reset(step)
    served = Served(fake.app)
    try:
        done = run_block(
            "assistant",
            home,
            env
            | {"MODEL": "fake-model", "OPENAI_BASE_URL": f"{served.root}/v1", "OPENAI_API_KEY": "test-key"},
        )
    finally:
        served.stop()
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert fake.requests and fake.requests[0]["model"] == "fake-model"
    assert any(m["role"] == "tool" for r in fake.requests for m in r["messages"])  # tool calls went through
    page = (home / "my-model-1.html").read_text(encoding="utf-8")
    assert "my-model-1" in page and "<svg" in page


def test_job_2_replay_and_rescore(folder) -> None:
    home, env = folder
    done = run_block("rescore", home, env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    report = json.loads((home / "base-1.json").read_text(encoding="utf-8"))
    assert report["run"] == "base-1" and report["sessions"]
    assert "base-1-oracle" in (home / "compare.html").read_text(encoding="utf-8")
    log = (home / "rounds-log.jsonl").read_text(encoding="utf-8").splitlines()
    assert any('"rounds.session.started"' in line for line in log)


@pytest.mark.parametrize("auth", [False, True], ids=["auth-off", "auth-on"])
def test_job_3_a_connector_with_fhirpy_against_a_session(folder, auth: bool) -> None:
    """As written, against `rounds serve` with access control off and on (ROUNDS_AUTH=on: the snippet's
    ROUNDS_TOKEN from `rounds token issue`, as its comment says)."""
    home, env = folder
    port = free_port()
    if auth:
        env = env | {"ROUNDS_AUTH": "on"}
        issued = subprocess.run(["rounds", "token", "issue", "--scope", "user/*.cruds"], cwd=home, env=env,
                                capture_output=True, text=True, timeout=120)
        assert issued.returncode == 0, issued.stderr[-2000:]
        env = env | {"ROUNDS_TOKEN": issued.stdout.strip()}
    admin = {"Authorization": f"Bearer {env['ROUNDS_TOKEN']}"} if auth else {}
    server = subprocess.Popen(
        ["rounds", "serve", "--port", str(port)],
        cwd=home,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    root = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(f"{root}/fhir/metadata", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            pytest.fail("rounds serve did not answer")
        notes = {"code:text": "connector note"}
        before = httpx.get(f"{root}/fhir/Observation", params=notes, headers=admin).json()
        lang, code = readme_jobs()["connector"]
        code = code.replace('ROUNDS = "http://127.0.0.1:8080"', f'ROUNDS = "{root}"')
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=home, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-3000:]
        after = httpx.get(f"{root}/fhir/Observation", params=notes, headers=admin).json()
        assert len(after.get("entry", [])) == len(before.get("entry", []))  # the write stayed in its session
    finally:
        server.terminate()
        server.wait(timeout=30)
