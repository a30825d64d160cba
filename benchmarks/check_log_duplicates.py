"""Events published more than once on the embedded default, counted the way a user would see them.

    python benchmarks/check_log_duplicates.py [--runs 3] [--limit 10]

What issue 26 tried: `rounds demo` in a fresh folder (SQLite `rounds.sqlite` + the embedded SQL log), then
`rounds serve` on that database (its own outbox relay running), and beside it `--runs` runs of `baseline`
over `--limit` scenarios in EN and ZH one after another (each run's process has its relay too; the last run
goes through the server, `--fhir-base`, so the server's recorder publishes as well). Then `rounds events dump
--from-beginning` exports the log and every (source, id) seen more than once is counted, by type. Before the
relay claimed its rows on SQLite, three runs of 20 sessions showed 248 such events; the figure to print is 0.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx
import orjson


def rounds(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "rounds.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True)
    if done.returncode not in (0,):
        raise SystemExit(f"rounds {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(base: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/fhir/metadata", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"rounds serve did not answer at {base} within {timeout_s:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--limit", type=int, default=10, help="scenarios per run (x2 languages = sessions)")
    args = parser.parse_args()
    repo = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="log-dups-") as tmp:
        work = Path(tmp)
        url = f"sqlite:///{work / 'rounds.sqlite'}"
        env = {**os.environ, "ROUNDS_DATABASE_URL": url, "PYTHONPATH": str(repo)}
        started = time.perf_counter()
        rounds("demo", cwd=work, env=env)
        print(f"rounds demo: {time.perf_counter() - started:.1f} s")
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        server = subprocess.Popen([sys.executable, "-m", "rounds.cli", "serve", "--port", str(port)],
                                  cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_up(base)
            for i in range(args.runs):
                through = ["--fhir-base", base] if i == args.runs - 1 else []
                started = time.perf_counter()
                rounds("run", "--scenarios", "rounds-demo/scenarios.jsonl", "--assistant", "baseline",
                       "--language", "both", "--limit", str(args.limit), "--run-id", f"dups-{i}", *through,
                       cwd=work, env=env)
                print(f"rounds run dups-{i} ({'through rounds serve' if through else 'in-process'}) beside "
                      f"rounds serve: {time.perf_counter() - started:.1f} s")
            time.sleep(2)  # the server's relay publishes what its last requests recorded
        finally:
            server.terminate()
            server.wait(timeout=30)
        dump = rounds("events", "dump", "--from-beginning", cwd=work, env=env)
    seen: Counter = Counter()
    types: dict[tuple[str, str], str] = {}
    for line in dump.stdout.splitlines():
        if line.strip():
            event = orjson.loads(line)
            key = (event["source"], event["id"])
            seen[key] += 1
            types[key] = event["type"]
    doubled = {key: n for key, n in seen.items() if n > 1}
    by_type = Counter(types[key] for key in doubled)
    print(f"rounds events dump --from-beginning: {sum(seen.values())} events, {len(seen)} distinct "
          f"(source, id); published more than once: {len(doubled)}"
          + (f" ({dict(by_type)})" if by_type else ""))
    if doubled:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
