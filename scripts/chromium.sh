#!/usr/bin/env bash
# Make sure a headless browser is installed for the HTML report's tests (tests/consumers/report/test_html_browser.py):
#   scripts/chromium.sh ensure -> prints CHROMIUM=/usr/bin/chromium, installing Debian's chromium package if missing
# Needs root or passwordless sudo to install. ROUNDS_CHROMIUM names another binary to use instead.
set -euo pipefail

die() { echo "chromium.sh: ERROR: $*" >&2; exit 1; }
# shellcheck source=lib/install.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/install.sh"

find_browser() {
  if [ -n "${ROUNDS_CHROMIUM:-}" ]; then
    if [ -x "$ROUNDS_CHROMIUM" ]; then echo "$ROUNDS_CHROMIUM"; fi
    return 0
  fi
  command -v chromium 2>/dev/null || command -v chromium-browser 2>/dev/null || true
}

cmd_ensure() {
  local found
  found="$(find_browser)"
  if [ -z "$found" ]; then
    [ -z "${ROUNDS_CHROMIUM:-}" ] || die "ROUNDS_CHROMIUM=$ROUNDS_CHROMIUM is not an executable."
    command -v apt-get >/dev/null 2>&1 || die "chromium is not installed and apt-get is unavailable; install Chromium."
    echo "chromium.sh: installing Debian's chromium package..." >&2
    apt_install /tmp/rounds-apt-chromium.log chromium || die "could not install Debian's chromium package."
    found="$(find_browser)"
    [ -n "$found" ] || die "chromium installed but not on PATH."
  fi
  echo "CHROMIUM=$found"
}

case "${1:-}" in
  ensure) cmd_ensure ;;
  *) echo "usage: $0 ensure" >&2; exit 2 ;;
esac
