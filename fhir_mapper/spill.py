"""Group-by with bounded memory: partial aggregates live in a dict until `limit` values have been added
since the last spill (so list-valued groups are bounded by rows, not keys), then are spilled to hash
partitions on disk; iteration merges one partition at a time. Partitions follow a checksum of the key's
repr, not `hash()` (salted per process), so a spilled run writes its output in the same order every time.

On the demo nothing spills; on full MIMIC (tens of millions of lab specimens) memory stays flat.
"""

from __future__ import annotations

import marshal
import pickle
import tempfile
import zlib
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from typing import IO, Generic, TypeVar

from foundation.gcpause import gc_paused

A = TypeVar("A")


def _write_block(handle: IO[bytes], chunk: tuple[list, list]) -> None:
    """One spilled block: a tag, its length, then (keys, values) in marshal — 2-4x cheaper than pickle for
    the plain tuples/lists/dicts/strings the mappers group — or pickle for anything marshal refuses."""
    try:
        tag, data = b"M", marshal.dumps(chunk)
    except ValueError:
        tag, data = b"P", pickle.dumps(chunk, protocol=pickle.HIGHEST_PROTOCOL)
    handle.write(tag + len(data).to_bytes(8, "little"))
    handle.write(data)


def _read_block(handle: IO[bytes]) -> tuple[list, list] | None:
    header = handle.read(9)
    if not header:
        return None
    data = handle.read(int.from_bytes(header[1:], "little"))
    with gc_paused():  # a block is thousands of new containers and no cycles: no collector passes meanwhile
        return marshal.loads(data) if header[:1] == b"M" else pickle.loads(data)


class SpillGroups(Generic[A]):
    """key -> aggregate, where `merge(a, b)` combines two partial aggregates (it may mutate and return a)."""

    def __init__(
        self,
        merge: Callable[[A, A], A],
        limit: int = 100_000,
        partitions: int = 128,
        directory: Path | None = None,
    ) -> None:
        self.merge, self.limit, self.partitions, self.directory = merge, limit, partitions, directory
        self._mem: dict[Hashable, A] = {}
        self._held = 0
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._files: list[IO[bytes]] = []
        self.spills = 0

    def add(self, key: Hashable, value: A) -> None:
        current = self._mem.get(key)
        self._mem[key] = value if current is None else self.merge(current, value)
        self._held += 1
        if self._held >= self.limit:
            self._spill()

    def _spill(self) -> None:
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="rounds-spill-", dir=self.directory)
            # kept open across spills, closed by items()
            self._files = [Path(self._tmp.name, f"p{i}").open("w+b") for i in range(self.partitions)]  # noqa: SIM115
        keys: list[list[Hashable]] = [[] for _ in range(self.partitions)]
        values: list[list[A]] = [[] for _ in range(self.partitions)]
        for key, value in self._mem.items():
            p = zlib.crc32(repr(key).encode()) % self.partitions  # not hash(): stable across runs
            keys[p].append(key)
            values[p].append(value)
        self._mem.clear()
        for handle, chunk in zip(self._files, zip(keys, values, strict=True), strict=True):
            if chunk[0]:
                _write_block(handle, chunk)
        self._held = 0
        self.spills += 1

    def items(self) -> Iterator[tuple[Hashable, A]]:
        """Every (key, merged aggregate) once; the store is consumed."""
        if self._tmp is None:
            yield from self._mem.items()
            self._mem.clear()
            return
        self._spill()
        try:
            for handle in self._files:
                handle.seek(0)
                merged: dict[Hashable, A] = {}
                while (chunk := _read_block(handle)) is not None:
                    for key, value in zip(*chunk, strict=True):
                        current = merged.get(key)
                        merged[key] = value if current is None else self.merge(current, value)
                yield from merged.items()
                del merged
        finally:
            for handle in self._files:
                handle.close()
            self._tmp.cleanup()
            self._tmp = None
