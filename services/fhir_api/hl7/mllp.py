"""MLLP (HL7 v2 minimal lower layer protocol) framing and the two sinks of `rounds feed --hl7`: an MLLP
sender that waits for each message's ACK, and a file.

The sender is at least once: a message is done when its ACK says AA/CA for its control id; an AE/AR (the
receiver's NAK), a wrong or missing ACK, a timeout or a broken connection means it is sent again on a new
connection, with backoff, until `retry_s` has passed — then the feed stops with `DeliveryFailed` naming the
message. A message whose ACK was lost arrives twice with the same MSH-10: receivers de-duplicate on it.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

START, END = b"\x0b", b"\x1c\x0d"


class DeliveryFailed(RuntimeError):
    """A message the receiver did not accept within the retry budget."""


def frame(text: str) -> bytes:
    return START + text.encode("utf-8") + END


def read_frame(sock: socket.socket, buffer: bytearray) -> str:
    """The next framed message on `sock` (bytes before a start block are dropped, as MLLP says)."""
    while True:
        end = buffer.find(END)
        if end != -1:
            start = buffer.find(START)
            body = bytes(buffer[start + 1:end]) if start != -1 and start < end else bytes(buffer[:end])
            del buffer[:end + len(END)]
            return body.decode("utf-8", errors="replace")
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("MLLP peer closed the connection")
        buffer.extend(chunk)


def ack_of(text: str) -> tuple[str, str, str]:
    """(MSA-1 code, MSA-2 control id, MSA-3 / ERR text) of an ACK; ('', '', reason) when it is none."""
    segments = {s.split("|", 1)[0]: s.split("|") for s in text.replace("\n", "\r").split("\r") if s}
    msa = segments.get("MSA")
    if msa is None or len(msa) < 3:
        return "", "", f"no MSA segment in {text[:80]!r}"
    reason = msa[3] if len(msa) > 3 else ""
    err = segments.get("ERR")
    if not reason and err is not None and len(err) > 8:
        reason = err[8]
    return msa[1], msa[2], reason


def parse_url(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    if parts.scheme != "mllp" or not parts.hostname or parts.port is None:
        raise ValueError(f"an HL7 destination is mllp://host:port, not {url!r}")
    return parts.hostname, parts.port


@dataclass
class MllpSender:
    """Sends one message at a time and waits for its ACK (see the module docstring)."""

    host: str
    port: int
    timeout_s: float = 10.0
    retry_s: float = 60.0
    sleep: object = time.sleep
    attempts: int = 0  # every send, retries included (the test's and the report's figure)
    nacks: list[str] = field(default_factory=list)
    _sock: socket.socket | None = None
    _buffer: bytearray = field(default_factory=bytearray)

    @classmethod
    def of(cls, url: str, **options) -> MllpSender:
        return cls(*parse_url(url), **options)

    def _connected(self) -> socket.socket:
        if self._sock is None:
            self._sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
            self._buffer.clear()
        return self._sock

    def __str__(self) -> str:
        return f"mllp://{self.host}:{self.port}"

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _once(self, control: str, text: str) -> str | None:
        """None when accepted; else why not."""
        self.attempts += 1
        sock = self._connected()
        sock.sendall(frame(text))
        while True:
            code, acked, reason = ack_of(read_frame(sock, self._buffer))
            if acked == control or not acked:
                break  # an ACK of an earlier attempt of another message is skipped
        if code in ("AA", "CA"):
            return None
        return f"{code or 'no ACK'} {reason}".strip()

    def send(self, control: str, text: str) -> None:
        deadline = time.monotonic() + self.retry_s
        delay = 0.1
        while True:
            try:
                refused = self._once(control, text)
            except OSError as exc:
                refused = f"{type(exc).__name__}: {exc}"
                self.close()
            if refused is None:
                return
            self.nacks.append(f"{control}: {refused}")
            if time.monotonic() + delay > deadline:
                self.close()
                raise DeliveryFailed(f"message {control} not accepted by {self.host}:{self.port}: {refused}")
            self.sleep(delay)
            delay = min(delay * 2, 2.0)


@dataclass
class FileSink:
    """Appends each message to a file: segments end with CR, a message with a newline (what python-hl7's
    `split_file` and most interface engines read); a rerun appends the same control ids again."""

    path: Path

    def __str__(self) -> str:
        return str(self.path)

    def send(self, control: str, text: str) -> None:
        with self.path.open("a", encoding="utf-8", newline="") as fh:
            fh.write(text.rstrip("\r") + "\r\n")

    def close(self) -> None:
        return None
