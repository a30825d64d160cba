"""Charts on disk, one at a time: the scenario builder keeps no chart in memory longer than it works on it.

A spool is a file of frames (an 8-byte length, then a zlib-compressed pickle): a header, one frame per chart
in the order they were read, and a trailer (the patients skipped, with the reason). The builder writes each
chart once as it streams the record and reads back, by the offset `add` returned, only the charts whose
moments the selection evaluates. A shard's part file (parts.py) is the same spool, kept. It is a working file
of one build, written and read by this builder only (pickles: read only spools you made), not an interchange
format."""

from __future__ import annotations

import pickle
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from services.simulator.scenarios.chart import Chart

MAGIC = b"rounds-chart-spool\n"  # a spool's first bytes
LENGTH = 8  # bytes of a frame's length prefix
LEVEL = 1  # zlib level: the spool is read back once or twice, speed over size


class SpoolError(ValueError):
    """The file is not a spool of this builder (or it was cut short)."""


def _frame(obj: Any) -> bytes:
    body = zlib.compress(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), LEVEL)
    return len(body).to_bytes(LENGTH, "big") + body


def _read_frame(fh: BinaryIO) -> Any:
    head = fh.read(LENGTH)
    if len(head) < LENGTH:
        raise SpoolError("cut short (no trailer)")
    length = int.from_bytes(head, "big")
    body = fh.read(length)
    if len(body) < length:
        raise SpoolError("cut short (a frame ends early)")
    try:
        return pickle.loads(zlib.decompress(body))  # noqa: S301 - our own working file (module docstring)
    except (zlib.error, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as exc:
        raise SpoolError(f"unreadable frame ({type(exc).__name__}: {exc})") from exc


class SpoolWriter:
    """Appends charts to a new spool at `path`; `close(skipped)` writes the trailer that marks it complete."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fh = path.open("wb")
        self._fh.write(MAGIC)
        self._fh.write(_frame({"spool": "header", **header}))
        self.count = 0

    def add(self, chart: Chart) -> int:
        """Write the chart; its offset (what `Spool.load` takes)."""
        offset = self._fh.tell()
        self._fh.write(_frame(chart))
        self.count += 1
        return offset

    def close(self, skipped: list[dict[str, str]]) -> None:
        self._fh.write(_frame({"spool": "trailer", "charts": self.count, "skipped": skipped}))
        self._fh.close()

    def abandon(self) -> None:
        self._fh.close()
        self.path.unlink(missing_ok=True)


class Spool:
    """A spool read back: its header, its charts in order (one at a time) and any chart by offset."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh = path.open("rb")
        try:
            if self._fh.read(len(MAGIC)) != MAGIC:
                raise SpoolError("no spool signature")
            self.header = _read_frame(self._fh)
        except SpoolError:
            self._fh.close()
            raise
        if not isinstance(self.header, dict) or self.header.get("spool") != "header":
            self._fh.close()
            raise SpoolError("no spool header")
        self.trailer: dict[str, Any] | None = None

    def charts(self) -> Iterator[tuple[int, Chart]]:
        """(offset, chart) in the order written; the trailer is read at the end (SpoolError if absent)."""
        self._fh.seek(len(MAGIC))
        _read_frame(self._fh)
        while True:
            offset = self._fh.tell()
            item = _read_frame(self._fh)
            if isinstance(item, Chart):
                yield offset, item
                continue
            if not isinstance(item, dict) or item.get("spool") != "trailer":
                raise SpoolError(f"a frame at {offset} is neither a chart nor the trailer")
            self.trailer = item
            return

    def load(self, offset: int) -> Chart:
        self._fh.seek(offset)
        chart = _read_frame(self._fh)
        if not isinstance(chart, Chart):
            raise SpoolError(f"no chart at offset {offset}")
        return chart

    def close(self) -> None:
        self._fh.close()
