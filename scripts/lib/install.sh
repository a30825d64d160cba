# Sourced by scripts/*.sh: install a Debian package from nothing, as root or through passwordless sudo.
#   apt_install LOG PACKAGE...   installs the packages; on failure refreshes the package lists once and retries.
# `timeout` runs a program, not a shell function, so the privilege wrapper goes outside it. sudo resets the
# environment, so DEBIAN_FRONTEND travels through `env`. ROUNDS_APT_TIMEOUT bounds each apt-get call (seconds).

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo -n "$@"
  else
    echo "not root and no sudo: cannot run '$*'" >&2
    return 1
  fi
}

_apt() {  # _apt LOG ARGS...: one bounded apt-get call with the privileges it needs
  local log="$1"; shift
  as_root timeout "${ROUNDS_APT_TIMEOUT:-900}" env DEBIAN_FRONTEND=noninteractive apt-get "$@" >>"$log" 2>&1
}

apt_install() {
  local log="$1"; shift
  command -v apt-get >/dev/null 2>&1 || { echo "apt-get is unavailable; install $* by hand." >&2; return 1; }
  : >"$log"
  _apt "$log" install -y -q "$@" && return 0
  _apt "$log" update -q || true
  _apt "$log" install -y -q "$@" && return 0
  tail -n 20 "$log" >&2
  echo "apt-get install $* failed (log: $log). Run as root or with passwordless sudo, and check the package mirror." >&2
  return 1
}
