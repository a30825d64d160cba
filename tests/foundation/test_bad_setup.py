"""Bad set-up gives a clear message naming the problem, within a bounded time."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # whole pipelines, subprocesses or real services: not in the fast lane

REPO = Path(__file__).resolve().parents[2]


def _run(script: str, env: dict[str, str], timeout: int = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(REPO / "scripts" / script), "start"], env={**os.environ, **env},
        capture_output=True, text=True, timeout=timeout,
    )


def _path_without(tmp_path: Path, *hidden: str) -> str:
    """A PATH with every command of the current PATH except `hidden` (symlinked into one folder)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        p = Path(folder)
        if not p.is_dir():
            continue
        for exe in p.iterdir():
            target = bindir / exe.name
            if exe.name in hidden or target.exists():
                continue
            target.symlink_to(exe)
    return str(bindir)


def test_kafka_without_java_names_the_problem(tmp_path: Path) -> None:
    # no Java and no package manager to install it with
    path = _path_without(tmp_path, "java", "apt-get")
    res = _run("kafka.sh", {"PATH": path, "KAFKA_STATE_DIR": str(tmp_path / "s")})
    assert res.returncode != 0
    assert "no Java found" in res.stderr and "17" in res.stderr


def test_kafka_with_maven_unreachable_names_the_problem(tmp_path: Path) -> None:
    env = {
        "KAFKA_CACHE_DIR": str(tmp_path / "cache"),
        "KAFKA_STATE_DIR": str(tmp_path / "s"),
        # Offline with an empty local repository: exactly what an unreachable Maven Central looks like.
        "KAFKA_MAVEN_ARGS": f"-o -Dmaven.repo.local={tmp_path / 'm2'}",
    }
    res = _run("kafka.sh", env, timeout=300)
    assert res.returncode != 0
    assert "Maven could not resolve" in res.stderr and "Maven Central reachable" in res.stderr


def test_kafka_port_taken_names_the_port(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        res = _run("kafka.sh", {"KAFKA_PORT": str(port), "KAFKA_STATE_DIR": str(tmp_path / "s")})
    assert res.returncode != 0
    assert f"KAFKA_PORT={port} is already in use" in res.stderr


@pytest.mark.postgres
def test_postgres_port_taken_names_the_port(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        res = _run("postgres.sh", {"PG_PORT": str(port), "PG_STATE_FILE": str(tmp_path / "state")})
    assert res.returncode != 0
    assert f"PG_PORT={port} is already in use" in res.stderr


@pytest.mark.postgres
def test_postgres_refusing_to_start_is_reported(tmp_path: Path, postgres_server: str) -> None:
    # postgres_server guarantees the binaries are installed; a bad server flag makes it refuse to start.
    env = {"PG_STATE_FILE": str(tmp_path / "state"), "PG_EXTRA_OPTS": "-c shared_buffers=notasize"}
    res = _run("postgres.sh", env)
    assert res.returncode != 0
    assert "PostgreSQL refused to start" in res.stderr
    assert not (tmp_path / "state").exists()
