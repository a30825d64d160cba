"""A relay that lets a person (or a helper agent) answer `rounds run --assistant http://HOST:PORT/turn`.

Why: the careful-assistant fixtures (issue 36, item 7) are answered by hand, by someone who reads the record
through the session's FHIR base and patient endpoint and never sees the truth. Rounds' `http:` adapter POSTs
one JSON request per physician turn and waits for `{"text": ...}`; this relay turns that into files:

- each request is written to `<inbox>/<session>--<turn>.json` (the adapter's payload as received);
- the relay then waits for `<outbox>/<session>--<turn>.txt` (the answer, plain UTF-8 text) and returns it
  as `{"text": ...}`; the answer file is moved to `<outbox>/sent/` so a resumed run never re-reads it.

HEAD (the adapter's preflight) answers 200. A turn nobody answers within `--wait` seconds gets HTTP 504, which
the adapter records as the assistant's failure (not the network's). Standard library only: it runs anywhere
the repository's Python runs, with nothing to install.

    python benchmarks/careful_relay.py --port 18801 --inbox /tmp/in --outbox /tmp/out &
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def turn_key(payload: dict) -> str:
    """`<session>--<turn>`: a file name for one turn, safe on any file system."""
    session = SAFE_NAME.sub("_", str(payload.get("session", "unknown")))
    return f"{session}--{int(payload.get('turn', 0))}"


def wait_for_answer(outbox: Path, key: str, wait_s: float, poll_s: float = 0.5) -> str | None:
    """The non-empty answer written to `<outbox>/<key>.txt` within `wait_s`, moved to `sent/`; else None."""
    answer = outbox / f"{key}.txt"
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if answer.exists():
            text = answer.read_text(encoding="utf-8")
            if text.strip():
                sent = outbox / "sent"
                sent.mkdir(exist_ok=True)
                shutil.move(str(answer), sent / answer.name)
                return text.strip()
        time.sleep(poll_s)
    return None


def make_handler(inbox: Path, outbox: Path, wait_s: float) -> type[BaseHTTPRequestHandler]:
    class RelayHandler(BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:  # the adapter's preflight: any answer proves the endpoint is there
            self.send_response(200)
            self.end_headers()

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                payload = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                self._reply(400, {"error": "request body is not JSON"})
                return
            if not isinstance(payload, dict) or "message" not in payload:
                self._reply(400, {"error": "expected the http: adapter's turn request"})
                return
            key = turn_key(payload)
            pending = inbox / f"{key}.json.part"
            pending.write_text(json.dumps(payload, ensure_ascii=False, indent=1), encoding="utf-8")
            pending.rename(inbox / f"{key}.json")  # appears whole, never half-written
            text = wait_for_answer(outbox, key, wait_s)
            if text is None:
                self._reply(504, {"error": f"no answer for {key} within {wait_s:.0f} s"})
                return
            self._reply(200, {"text": text})

        def _reply(self, status: int, body: dict) -> None:
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, fmt: str, *args: object) -> None:  # one line per request, on stderr
            super().log_message(fmt, *args)

    return RelayHandler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--inbox", type=Path, required=True, help="requests are written here")
    parser.add_argument("--outbox", type=Path, required=True, help="answers <session>--<turn>.txt")
    parser.add_argument("--wait", type=float, default=580.0,
                        help="seconds to wait for an answer (under the adapter's 600 s read timeout)")
    args = parser.parse_args()
    args.inbox.mkdir(parents=True, exist_ok=True)
    args.outbox.mkdir(parents=True, exist_ok=True)
    server = ThreadingHTTPServer((args.host, args.port), make_handler(args.inbox, args.outbox, args.wait))
    print(f"careful relay on http://{args.host}:{args.port}/turn; inbox {args.inbox}, outbox {args.outbox}",
          flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
