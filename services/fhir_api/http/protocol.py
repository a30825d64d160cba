"""uvicorn's HTTP protocols with FHIR refusals: what the parser itself refuses is an OperationOutcome too.

uvicorn answers a request its parser cannot take with a plain-text 400 (`Invalid HTTP request received.`).
These subclasses answer an OperationOutcome instead, and bound what a request head may cost: up to `HEAD_CAP`
bytes and `HEAD_FIELDS_CAP` header fields are let through to the app, whose `RequestLimits` middleware
(request_limits.py) refuses anything over the documented, smaller limits with 414 / 431; beyond the caps the
protocol answers 414 (the URL is what is long) or 431 itself and closes the connection. httptools (the
default with uvicorn[standard]) buffers headers without any limit and cannot parse URLs over 64 KiB; h11 holds
`h11_max_incomplete_event_size` bytes, set to `HEAD_CAP`.

A refusal is followed by a lingering close (as Apache and nginx do): the write side is shut after the
answer and what the client still sends is read and dropped for up to `LINGER_SECONDS` / `LINGER_BYTES`, so a
client still writing its oversized head reads the answer instead of a connection reset.

`uvicorn_options()` is what every uvicorn serving the FHIR app passes (`rounds serve`, the simulator's
embedded server, the tests' live servers).
"""

from __future__ import annotations

import asyncio
from http import HTTPStatus
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from services.fhir_api.http.errors import FHIR_JSON, outcome_bytes
from services.fhir_api.limits import HEAD_CAP, HEAD_FIELDS_CAP, MAX_URL_BYTES


def outcome_reply(status: int, message: str) -> bytes:
    """A complete HTTP/1.1 response carrying an OperationOutcome, closing the connection."""
    body = outcome_bytes([message], "too-long" if status in (414, 431) else "structure")
    head = (f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\ncontent-type: {FHIR_JSON}\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n")
    return head.encode("ascii") + body


LINGER_SECONDS = 5.0
LINGER_BYTES = 16 * 1024 * 1024


class _Refusing:
    """Answer an OperationOutcome, then read and drop the rest for a while before closing."""

    transport: asyncio.Transport
    _dropped: int | None = None  # bytes dropped since the refusal; None: not refused

    def _refuse(self, status: int, message: str) -> None:
        self.transport.write(outcome_reply(status, message))
        if not self.transport.can_write_eof():
            self.transport.close()
            return
        self.transport.write_eof()
        self._dropped = 0
        asyncio.get_running_loop().call_later(LINGER_SECONDS, self.transport.close)

    def _dropping(self, data: bytes) -> bool:
        """Whether `data` arrived after a refusal (and is dropped)."""
        if self._dropped is None:
            return False
        self._dropped += len(data)
        if self._dropped > LINGER_BYTES:
            self.transport.close()
        return True


def _refusal(url_bytes: int, head_bytes: int) -> tuple[int, str]:
    if url_bytes > MAX_URL_BYTES:
        return 414, f"request URL longer than {MAX_URL_BYTES} bytes"
    if head_bytes > HEAD_CAP:
        return 431, f"request head (line and headers) longer than {HEAD_CAP} bytes"
    return 400, "malformed HTTP request"


class FhirH11Protocol(_Refusing, H11Protocol):
    def data_received(self, data: bytes) -> None:
        if not self._dropping(data):
            super().data_received(data)

    def send_400_response(self, msg: str) -> None:
        buffered = self.conn.trailing_data[0]
        self._refuse(*_refusal(len(buffered.split(b"\r\n", 1)[0]), len(buffered)))


try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # pragma: no cover - httptools comes with uvicorn[standard]
    HttpToolsProtocol = None  # type: ignore[assignment,misc]

if HttpToolsProtocol is not None:

    class FhirHttpToolsProtocol(_Refusing, HttpToolsProtocol):  # type: ignore[misc,valid-type]
        _head: int | None = 0  # bytes of the current request head so far; None once its headers are in
        _fields_over = False

        def data_received(self, data: bytes) -> None:
            if self._dropping(data):
                return
            if self._head is None:
                super().data_received(data)
                return
            self._head += len(data)
            super().data_received(data)  # may complete the head (the app starts) or refuse it
            if self._head is not None and self._head > HEAD_CAP and self._dropped is None \
                    and not self.transport.is_closing():
                self.send_400_response("")

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._fields_over = False

        def on_header(self, name: bytes, value: bytes) -> None:
            if len(self.headers) >= HEAD_FIELDS_CAP:
                self._fields_over = True
                raise ValueError("too many header fields")  # the parser stops: send_400_response
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            self._head = None
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._head = 0

        def send_400_response(self, msg: str) -> None:
            if self._fields_over:
                status, message = 431, f"more than {HEAD_FIELDS_CAP} header fields"
            else:
                status, message = _refusal(len(getattr(self, "url", b"")), self._head or 0)
            self._refuse(status, message)


def uvicorn_options() -> dict[str, Any]:
    """Keyword arguments for uvicorn.Config / uvicorn.run serving the FHIR app."""
    protocol = FhirHttpToolsProtocol if HttpToolsProtocol is not None else FhirH11Protocol
    return {"http": protocol, "h11_max_incomplete_event_size": HEAD_CAP}
