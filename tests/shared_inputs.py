"""Expensive test inputs (the mapped and loaded MIMIC-IV demo, a synthetic record) built once per test run.

Under pytest-xdist every worker is its own process with its own session fixtures, so a session fixture that
maps the demo would map it once per worker. `built_once` builds into the folder all workers of one run share
(the parent of each worker's base temp folder), under a file lock: the first worker builds, the others wait
and reuse it. Without xdist it is an ordinary session-level build. Callers copy what they will write to (a
SQLite store) into their own folder, so no worker sees another's sessions.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock


def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder every worker of this run shares (a worker's base temp is `<run>/popen-gwN`)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder `build(folder)` filled, built by the first worker of the run that asked for it."""
    root = run_folder(tmp_path_factory) / f"shared-{name}"
    done = root / ".complete"
    with FileLock(str(root) + ".lock"):
        if not done.exists():
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir(parents=True)
            build(root)
            done.touch()
    return root


def private_sqlite(shared: Path, into: Path) -> str:
    """A worker's own copy of a shared SQLite store (checkpointed by its builder), as a URL."""
    into.mkdir(parents=True, exist_ok=True)
    target = into / shared.name
    shutil.copyfile(shared, target)
    return f"sqlite:///{target}"
