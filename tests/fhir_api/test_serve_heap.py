"""The served app's startup heap is frozen, so full collections no longer walk it (foundation.gcpause)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import gc, os
from rounds.migrate import upgrade
from rounds.root import served_app as app_from_env
upgrade(os.environ["ROUNDS_DATABASE_URL"])
app = app_from_env()
print(gc.get_freeze_count(), gc.get_threshold()[0], len(gc.get_objects()))
"""


def test_app_from_env_freezes_startup_heap(tmp_path) -> None:
    env = {"ROUNDS_DATABASE_URL": f"sqlite:///{tmp_path / 'store.db'}", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    frozen, young_threshold, tracked = map(int, out)
    assert frozen > 50_000  # the framework and the models
    assert tracked < frozen / 10  # what a full collection still walks
    assert young_threshold == 10_000
