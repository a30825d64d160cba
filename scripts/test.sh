#!/usr/bin/env bash
# Install everything the tests need and run them against a real Kafka broker and a real PostgreSQL.
# The pytest fixtures start both through scripts/kafka.sh and scripts/postgres.sh and stop them at the end.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python3 -m pip install -q --disable-pip-version-check -e '.[test]'
# Install PostgreSQL up front (idempotent) so its absence is reported once, clearly.
scripts/postgres.sh start >/dev/null && scripts/postgres.sh stop >/dev/null 2>&1 || true
# The HTML report is checked in headless Chromium (Debian's package); with CI=true its absence fails those tests.
scripts/chromium.sh ensure >/dev/null || true
python3 -m ruff check .
exec python3 -m pytest -q -ra --durations=15 "$@"
