#!/usr/bin/env bash
# Install everything the tests need, from nothing, and run them against a real Kafka broker, a real PostgreSQL
# and headless Chromium. The pytest fixtures start Kafka and PostgreSQL through scripts/kafka.sh and
# scripts/postgres.sh (one of each per pytest-xdist worker) and stop them at the end.
#   scripts/test.sh        the full suite, in parallel (ROUNDS_TEST_WORKERS, default `auto`: one worker more
#                          than the cores, tests/conftest.py; idle workers steal queued tests; the long
#                          modules lead the workers' shares, tests/scheduling.py); extra arguments go to
#                          pytest
# The fast lane needs none of the installs: `python3 -m pytest -m "not slow" -n auto` (tests/conftest.py).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
in_ci() { case "${CI:-}" in 1|true|yes|TRUE|True) return 0 ;; *) return 1 ;; esac; }

python3 -m pip install -q --disable-pip-version-check -e '.[test]'
# Install the services and the browser up front so a missing one is reported once, clearly; in CI that fails
# the run here, elsewhere the tests that need it are skipped with the reason.
for step in "postgres.sh install" "kafka.sh install" "chromium.sh ensure" "jsclient.sh install"; do
  # shellcheck disable=SC2086
  if ! scripts/$step >/dev/null; then
    if in_ci; then echo "test.sh: scripts/$step failed (CI=true)" >&2; exit 1; fi
    echo "test.sh: scripts/$step failed; the tests that need it will be skipped" >&2
  fi
done
python3 -m ruff check .
exec python3 -m pytest -q -ra --durations=15 -n "${ROUNDS_TEST_WORKERS:-auto}" --dist worksteal "$@"
