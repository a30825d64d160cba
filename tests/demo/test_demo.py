"""The main job (`rounds demo`) runs end to end on the embedded default and shows the sandbox guarantees."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from rounds.demo import run_demo


def test_demo_end_to_end_on_sqlite(tmp_path: Path, sqlite_url: str) -> None:
    figures = run_demo(patients=2, seed=7, mimic=None, workdir=tmp_path, database_url=sqlite_url)
    assert figures["rejected_rows"] == 0
    assert figures["loaded_resources"] == figures["mapped_resources"] > 0
    # The clock is the moment the first lab was issued (given with a -04:00 offset): that lab is visible,
    # later ones of the same code are not.
    assert 1 <= figures["labs_visible_at_now"] <= figures["labs_in_record"]
    assert figures["latest_lab"] is not None
    # A session write lands in the session only.
    assert figures["session_write_status"] == 201
    assert figures["session_write_visible_in_shared"] == 0


def test_demo_cli_prints_figures(tmp_path: Path) -> None:
    env = {**os.environ, "ROUNDS_DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite'}"}
    res = subprocess.run(
        ["rounds", "demo", "--patients", "1", "--workdir", str(tmp_path / "w")],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    assert "labs_visible_at_now" in res.stdout and "loaded_resources" in res.stdout
    assert (tmp_path / "demo.sqlite").exists()
