"""Every install path of scripts/*.sh runs from nothing, as root and through sudo, and fails clearly.

A fresh machine has no Chromium, maybe no PostgreSQL server, Java or Maven. Each script is run with a PATH
that holds only basic tools and stand-ins for the package manager: `apt-get` (records its calls and "installs"
a stand-in of the package; fails until `apt-get update` when told to, as on a machine with stale lists),
`sudo` (records, then runs the command) and `id` (to act as a non-root user). The real `timeout` and `env` run
the stand-ins, so a privilege wrapper `timeout` cannot execute (a shell function) fails here as it did on a
fresh machine.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BASIC = ["bash", "sh", "env", "timeout", "tail", "head", "cat", "mkdir", "ls", "sort", "dirname", "basename",
         "python3", "awk", "rm", "mv", "touch", "grep", "sed", "chmod", "tr", "cp", "mktemp", "sleep",
         "readlink", "id"]

APT_GET = r"""#!/bin/bash
echo "apt-get $* DEBIAN_FRONTEND=${DEBIAN_FRONTEND:-}" >> "$STUB_LOG"
if [ "$1" = update ]; then touch "$STUB_DIR/updated"; exit 0; fi
[ -n "${STUB_APT_FAIL:-}" ] && { echo "E: Unable to locate package" >&2; exit 100; }
[ -n "${STUB_APT_STALE:-}" ] && [ ! -f "$STUB_DIR/updated" ] && { echo "E: 404 Not Found" >&2; exit 100; }
for pkg in "$@"; do
  case "$pkg" in
    chromium) printf '#!/bin/sh\necho Chromium 1\n' > "$STUB_DIR/bin/chromium";
              chmod +x "$STUB_DIR/bin/chromium" ;;
    postgresql) mkdir -p "$PG_LIB_ROOT/16/bin"; printf '#!/bin/sh\n' > "$PG_LIB_ROOT/16/bin/initdb";
                chmod +x "$PG_LIB_ROOT/16/bin/initdb" ;;
    openjdk-17-jre-headless) printf '#!/bin/sh\necho "openjdk version \\"17.0.15\\" 2025-04-15" >&2\n' \
                > "$STUB_DIR/bin/java"; chmod +x "$STUB_DIR/bin/java" ;;
    maven) cat > "$STUB_DIR/bin/mvn" <<'MVN'
#!/bin/bash
for a in "$@"; do case "$a" in -DoutputDirectory=*) out="${a#-DoutputDirectory=}";; esac; done
mkdir -p "$out" && touch "$out/kafka_2.13-4.1.1.jar"
MVN
           chmod +x "$STUB_DIR/bin/mvn" ;;
  esac
done
"""
SUDO = """#!/bin/bash
echo "sudo $*" >> "$STUB_LOG"
[ "$1" = -n ] && shift
exec "$@"
"""
ID = """#!/bin/bash
[ "$1" = -u ] && { echo 1000; exit 0; }
exec /usr/bin/id "$@"
"""


def machine(tmp_path: Path, *, root: bool = True, sudo: bool = True) -> dict[str, str]:
    """A PATH with basic tools and the package-manager stand-ins, and nothing the scripts install."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in BASIC:
        if tool == "id" and not root:
            continue
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    stubs = {"apt-get": APT_GET, **({} if root else {"id": ID}), **({"sudo": SUDO} if sudo else {})}
    for name, text in stubs.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return {"PATH": str(bin_dir), "HOME": str(tmp_path), "STUB_DIR": str(tmp_path),
            "STUB_LOG": str(tmp_path / "calls.log"), "PG_LIB_ROOT": str(tmp_path / "pg"),
            "KAFKA_CACHE_DIR": str(tmp_path / "kafka"), "TMPDIR": str(tmp_path)}


def run(script: str, action: str, env: dict[str, str], **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / "scripts" / script), action], env={**env, **extra}, capture_output=True,
                          text=True, timeout=60, cwd=REPO)


def calls(env: dict[str, str]) -> list[str]:
    log = Path(env["STUB_LOG"])
    return log.read_text().splitlines() if log.exists() else []


INSTALLS = [
    ("chromium.sh", "ensure", "CHROMIUM=", ["chromium"]),
    ("postgres.sh", "install", "PG_BIN=", ["postgresql"]),
    ("kafka.sh", "install", "KAFKA_LIB=", ["openjdk-17-jre-headless", "maven"]),
]


@pytest.mark.parametrize(("script", "action", "printed", "packages"), INSTALLS)
def test_installs_what_is_missing_as_root(tmp_path: Path, script: str, action: str, printed: str,
                                          packages: list[str]) -> None:
    env = machine(tmp_path)
    done = run(script, action, env)
    assert done.returncode == 0, done.stderr
    assert printed in done.stdout
    installs = [c for c in calls(env) if c.startswith("apt-get install")]
    assert [c.split()[-2] for c in installs] == packages  # one install per missing package, nothing else
    assert all(c.endswith("DEBIAN_FRONTEND=noninteractive") for c in installs)
    assert not any(c.startswith("sudo") for c in calls(env))
    again = run(script, action, env)  # installed now: nothing is installed twice
    assert again.returncode == 0 and len(calls(env)) == len(installs)


@pytest.mark.parametrize(("script", "action", "printed", "packages"), INSTALLS)
def test_installs_through_sudo_when_not_root(tmp_path: Path, script: str, action: str, printed: str,
                                             packages: list[str]) -> None:
    env = machine(tmp_path, root=False)
    done = run(script, action, env)
    assert done.returncode == 0, done.stderr
    sudo = [c for c in calls(env) if c.startswith("sudo")]
    assert len(sudo) == len(packages) and all(c.startswith("sudo -n timeout") for c in sudo)
    assert all("DEBIAN_FRONTEND=noninteractive apt-get install" in c for c in sudo)


def test_stale_package_lists_are_refreshed_once(tmp_path: Path) -> None:
    env = machine(tmp_path)
    done = run("chromium.sh", "ensure", env, STUB_APT_STALE="1")
    assert done.returncode == 0, done.stderr
    assert [c.split()[1] for c in calls(env)] == ["install", "update", "install"]


@pytest.mark.parametrize(("script", "action", "printed", "packages"), INSTALLS)
def test_a_failed_install_names_the_package_and_its_log(tmp_path: Path, script: str, action: str,
                                                        printed: str, packages: list[str]) -> None:
    env = machine(tmp_path)
    done = run(script, action, env, STUB_APT_FAIL="1")
    assert done.returncode != 0
    assert packages[0] in done.stderr and "log:" in done.stderr and "ERROR" in done.stderr
    assert printed not in done.stdout


def test_not_root_and_no_sudo_says_so(tmp_path: Path) -> None:
    env = machine(tmp_path, root=False, sudo=False)
    done = run("postgres.sh", "install", env)
    assert done.returncode != 0
    assert "not root and no sudo" in done.stderr and "postgresql" in done.stderr
