"""A relay that lets a person (or an agent outside Rounds) answer the turns of `rounds run --assistant http:`.

Why: the careful-assistant fixtures of issue 36 are answers written by a clinician who reads only the
session's FHIR base and patient endpoint. Rounds calls the webhook once per physician turn and waits for
`{"text": ...}`; this relay writes each request to `<inbox>/<session>-t<turn>.json` and blocks until the
answer appears as `<outbox>/<session>-t<turn>.txt` (plain text, UTF-8), then returns it. Standard library
only, so it runs anywhere the CLI does.

    python benchmarks/careful_relay.py --port 18802 --inbox /tmp/x/inbox --outbox /tmp/x/outbox
"""

from __future__ import annotations

import argparse
import json
import re
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def turn_name(session: str, turn: int) -> str:
    """The file stem of one turn: the session id made filesystem-safe, then the turn number."""
    return f"{_UNSAFE.sub('_', session)}-t{turn}"


class Relay:
    """Inbox/outbox folders and how long a turn may wait for its answer."""

    def __init__(self, inbox: Path, outbox: Path, wait_s: float, poll_s: float = 1.0) -> None:
        self.inbox, self.outbox, self.wait_s, self.poll_s = inbox, outbox, wait_s, poll_s
        inbox.mkdir(parents=True, exist_ok=True)
        outbox.mkdir(parents=True, exist_ok=True)

    def answer(self, request: dict) -> str | None:
        """Write the request, wait for its answer file; None when none came within `wait_s`."""
        stem = turn_name(str(request["session"]), int(request["turn"]))
        pending = self.inbox / f"{stem}.json"
        tmp = pending.with_suffix(".tmp")
        tmp.write_text(json.dumps(request, ensure_ascii=False, indent=2), encoding="utf-8")
        tmp.replace(pending)  # atomic: a watcher never reads half a request
        reply = self.outbox / f"{stem}.txt"
        deadline = time.monotonic() + self.wait_s
        while time.monotonic() < deadline:
            if reply.exists():
                text = reply.read_text(encoding="utf-8").strip()
                if text:
                    pending.rename(self.inbox / f"{stem}.done.json")
                    return text
            time.sleep(self.poll_s)
        return None


def handler_for(relay: Relay) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:  # the run's preflight: any answer proves the relay is up
            self.send_response(200)
            self.end_headers()

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                request = json.loads(self.rfile.read(length) or b"{}")
                if "session" not in request or "turn" not in request:
                    raise ValueError("a turn needs 'session' and 'turn'")
            except ValueError as exc:
                self._send(400, {"error": str(exc)})
                return
            text = relay.answer(request)
            if text is None:
                self._send(504, {"error": f"no answer within {relay.wait_s:.0f} s"})
            else:
                self._send(200, {"text": text})

        def _send(self, status: int, body: dict) -> None:
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--inbox", type=Path, required=True)
    parser.add_argument("--outbox", type=Path, required=True)
    parser.add_argument("--wait", type=float, default=590.0, help="seconds a turn may wait for its answer")
    args = parser.parse_args()
    relay = Relay(args.inbox, args.outbox, args.wait)
    server = ThreadingHTTPServer((args.host, args.port), handler_for(relay))
    where = f"inbox={args.inbox} outbox={args.outbox}"
    print(f"relay on http://{args.host}:{args.port}/turn  {where}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
