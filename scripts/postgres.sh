#!/usr/bin/env bash
# Start/stop a throwaway PostgreSQL cluster (Debian package) on a free loopback port.
#   scripts/postgres.sh start -> prints DATABASE_URL=postgresql+psycopg://...
#   scripts/postgres.sh stop  -> stops the cluster and removes its folder
#   scripts/postgres.sh install -> installs Debian's postgresql when missing; prints PG_BIN=
# PG_LIB_ROOT (default /usr/lib/postgresql) is where the server binaries are looked for.
# Env: PG_PORT (default: a free port), PG_STATE_FILE, PG_START_TIMEOUT (default 60 s), PG_EXTRA_OPTS (server flags).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE_FILE="${PG_STATE_FILE:-$ROOT/.cache/postgres/state}"
TIMEOUT="${PG_START_TIMEOUT:-60}"
DB_NAME="${PG_DATABASE:-rounds}"

die() { echo "postgres.sh: ERROR: $*" >&2; exit 1; }

pg_bindir() {
  ls -d "${PG_LIB_ROOT:-/usr/lib/postgresql}"/*/bin 2>/dev/null | sort -V | tail -n 1
}

# shellcheck source=lib/install.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/install.sh"

ensure_installed() {
  [ -n "$(pg_bindir)" ] && [ -x "$(pg_bindir)/initdb" ] && return 0
  command -v apt-get >/dev/null 2>&1 || die "PostgreSQL server is not installed and apt-get is unavailable; install PostgreSQL 13+ server binaries."
  echo "postgres.sh: installing Debian's postgresql package..." >&2
  apt_install /tmp/rounds-apt.log postgresql || die "could not install Debian's postgresql package."
  [ -x "$(pg_bindir)/initdb" ] || die "postgresql installed but no initdb under /usr/lib/postgresql/*/bin."
}

# The server refuses to run as root: run it as an unprivileged user.
RUN_USER=""
pick_user() {
  if [ "$(id -u)" -ne 0 ]; then RUN_USER=""; return; fi
  if id postgres >/dev/null 2>&1; then RUN_USER=postgres; return; fi
  id rounds >/dev/null 2>&1 || useradd --system --no-create-home rounds || die "cannot create a non-root user to run PostgreSQL."
  RUN_USER=rounds
}
as_user() { if [ -n "$RUN_USER" ]; then runuser -u "$RUN_USER" -- "$@"; else "$@"; fi; }

free_port() {
  python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'
}
port_in_use() {
  python3 -c 'import socket,sys
s=socket.socket()
try: s.bind(("127.0.0.1",int(sys.argv[1])))
except OSError: sys.exit(0)
sys.exit(1)' "$1"
}

cmd_start() {
  if [ -f "$STATE_FILE" ]; then
    # shellcheck disable=SC1090
    . "$STATE_FILE"
    if [ -n "${DATADIR:-}" ] && as_user "$BIN/pg_ctl" -D "$DATADIR" status >/dev/null 2>&1; then
      echo "DATABASE_URL=postgresql+psycopg://$PGUSER_NAME@127.0.0.1:$PORT/$DB_NAME"; return 0
    fi
  fi
  ensure_installed
  pick_user
  BIN="$(pg_bindir)"
  local port="${PG_PORT:-}"
  if [ -n "$port" ]; then
    port_in_use "$port" && die "PG_PORT=$port is already in use; choose another port or unset PG_PORT."
  else
    port=$(free_port)
  fi
  DATADIR="$(mktemp -d /tmp/rounds-pg.XXXXXX)"
  chmod 755 "$DATADIR"
  [ -n "$RUN_USER" ] && chown "$RUN_USER" "$DATADIR"
  as_user "$BIN/initdb" -D "$DATADIR/data" -U rounds -A trust -E UTF8 --locale=C.UTF-8 >"$DATADIR/initdb.log" 2>&1 \
    || as_user "$BIN/initdb" -D "$DATADIR/data" -U rounds -A trust -E UTF8 --no-locale >"$DATADIR/initdb.log" 2>&1 \
    || { cat "$DATADIR/initdb.log" >&2; die "initdb failed."; }
  if ! as_user "$BIN/pg_ctl" -D "$DATADIR/data" -l "$DATADIR/server.log" -w -t "$TIMEOUT" \
        -o "-p $port -k $DATADIR -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 -c shared_buffers=256MB ${PG_EXTRA_OPTS:-}" start >/dev/null; then
    tail -n 30 "$DATADIR/server.log" >&2 || true
    rm -rf "$DATADIR"
    die "PostgreSQL refused to start within ${TIMEOUT}s (log: $DATADIR/server.log)."
  fi
  as_user "$BIN/createdb" -h 127.0.0.1 -p "$port" -U rounds "$DB_NAME" || die "createdb $DB_NAME failed."
  mkdir -p "$(dirname "$STATE_FILE")"
  cat > "$STATE_FILE" <<ST
BIN=$BIN
DATADIR=$DATADIR/data
ROOTDIR=$DATADIR
PORT=$port
RUN_USER=$RUN_USER
PGUSER_NAME=rounds
ST
  echo "DATABASE_URL=postgresql+psycopg://rounds@127.0.0.1:$port/$DB_NAME"
}

cmd_stop() {
  [ -f "$STATE_FILE" ] || { echo "postgres.sh: not running" >&2; return 0; }
  # shellcheck disable=SC1090
  . "$STATE_FILE"
  as_user "$BIN/pg_ctl" -D "$DATADIR" -m fast -w -t 30 stop >/dev/null 2>&1 || true
  rm -rf "$ROOTDIR" "$STATE_FILE"
  echo "postgres.sh: stopped" >&2
}

case "${1:-}" in
  install) ensure_installed; echo "PG_BIN=$(pg_bindir)" ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  *) echo "usage: $0 install|start|stop" >&2; exit 2 ;;
esac
