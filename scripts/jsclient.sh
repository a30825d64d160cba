#!/usr/bin/env bash
# Fetch SMART's JavaScript client (npm `fhirclient`) for the browser tests of SMART App Launch
# (tests/fhir_api/test_smart_js.py) into .cache/npm (reused when present); nothing is fetched at test time.
#   scripts/jsclient.sh install -> prints FHIRCLIENT_JS=<path of the browser bundle build/fhir-client.js>
# Env: FHIRCLIENT_VERSION (default 2.6.3), JSCLIENT_CACHE_DIR (default .cache/npm).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="${FHIRCLIENT_VERSION:-2.6.3}"
CACHE="${JSCLIENT_CACHE_DIR:-$ROOT/.cache/npm}"
DIR="$CACHE/fhirclient-$VERSION"

die() { echo "jsclient.sh: ERROR: $*" >&2; exit 1; }

cmd_install() {
  local bundle="$DIR/package/build/fhir-client.js"
  if [ ! -f "$bundle" ]; then
    command -v npm >/dev/null 2>&1 || die "npm is not installed (Debian: apt-get install npm)."
    mkdir -p "$CACHE"
    rm -rf "$DIR.tmp" && mkdir -p "$DIR.tmp"
    (cd "$DIR.tmp" && npm pack --silent "fhirclient@$VERSION" >/dev/null) \
      || die "npm could not fetch fhirclient@$VERSION (is the npm registry reachable?)"
    tar -xzf "$DIR.tmp/fhirclient-$VERSION.tgz" -C "$DIR.tmp"
    [ -f "$DIR.tmp/package/build/fhir-client.js" ] || die "fhirclient@$VERSION has no build/fhir-client.js"
    rm -rf "$DIR" && mv "$DIR.tmp" "$DIR"
  fi
  echo "FHIRCLIENT_JS=$bundle"
}

case "${1:-}" in
  install) cmd_install ;;
  *) echo "usage: $0 install" >&2; exit 2 ;;
esac
