"""The README's "From Inspect AI" commands run as written, in the folder `rounds demo` leaves, with Inspect's
own `openai` provider against a local OpenAI-compatible server this test starts (no model is contacted), and
`inspect` finding the task through the installed entry point."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.rounds.inspect.test_registration import REPO, installed_entry_point
from tests.simulator.adapters.conftest import Served
from tests.simulator.adapters.fake_openai import FakeOpenAI, text, tool_call

BLOCK = re.compile(r"<!-- inspect-job: eval -->\n```bash\n(?P<code>.*?)```", re.S)
pytestmark = pytest.mark.slow  # an Inspect eval and a report in subprocesses


def test_the_readme_commands_run_the_task_and_report_it(demo_scenarios, tmp_path: Path) -> None:
    url, scenarios = demo_scenarios
    home = scenarios.parent.parent
    code = BLOCK.search((REPO / "README.md").read_text())["code"]
    site = installed_entry_point(tmp_path / "site")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "rounds"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m rounds.cli "$@"\n')
    shim.chmod(0o755)
    fake = FakeOpenAI(models=("gpt-4o-mini",))

    def step(body: dict) -> tuple:  # ask the patient, then answer with what they said
        said = [m for m in body["messages"] if m["role"] == "tool"]
        if said and body["messages"][-1]["role"] == "tool":
            return text(fake, f"The patient says: {str(said[-1]['content'])[:200]}")
        return tool_call(fake, "ask_patient", {"question": "What medicines do you take?"})

    fake.reset(step)
    served = Served(fake.app)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROUNDS_", "OPENAI_", "INSPECT_"))}
    env |= {"PATH": f"{bin_dir}:{Path(sys.executable).parent}:{env['PATH']}", "COLUMNS": "120",
            "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]), "MODEL": "gpt-4o-mini",
            "OPENAI_BASE_URL": f"{served.root}/v1", "OPENAI_API_KEY": "test-key"}
    try:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=home, env=env,
                              capture_output=True, text=True, timeout=600)
    finally:
        served.stop()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    said = done.stdout[-3000:] + done.stderr[-3000:]
    assert fake.requests and fake.requests[0]["model"] == "gpt-4o-mini", said
    offered = {t["function"]["name"] for t in fake.requests[0]["tools"]}
    assert offered >= {"fhir_search", "ask_patient", "answer"}
    assert any(m["role"] == "tool" for r in fake.requests for m in r["messages"])  # the patient answered
    page = (home / "inspect-1.html").read_text(encoding="utf-8")
    assert "inspect-1" in page and "<svg" in page
    out = tmp_path / "inspect-1.json"
    report = subprocess.run([sys.executable, "-m", "rounds.cli", "report", "--run", "inspect-1", "--json",
                             str(out)], cwd=home, env=env, capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr[-3000:]
    sessions = json.loads(out.read_text())["sessions"]
    assert sessions and all(s["reason"] == "completed" and s["score"] is not None for s in sessions), said
    assert {s["assistant"] for s in sessions} == {"inspect:openai/gpt-4o-mini"}
    assert {s["language"] for s in sessions} == {"en", "zh"}
