"""Fixtures of the report's tests: the sample runs and a headless Chromium (Debian's package).

With CI=true a missing browser fails the browser tests (scripts/test.sh installs it); elsewhere they are
skipped.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from contracts.score import RunReport
from tests.consumers.report.sample import baseline_run, replay_of

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def baseline() -> RunReport:
    return baseline_run()


@pytest.fixture(scope="session")
def replay(baseline: RunReport) -> RunReport:
    return replay_of(baseline)


@pytest.fixture(scope="session")
def chromium() -> Path:
    found = os.environ.get("ROUNDS_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        message = "no chromium on PATH (scripts/chromium.sh installs Debian's package)"
        if IN_CI:
            pytest.fail(f"{message}; CI=true makes this a failure", pytrace=False)
        pytest.skip(message)
    return Path(found)
