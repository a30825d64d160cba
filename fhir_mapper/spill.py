"""Group-by with bounded memory: partial aggregates live in a dict until `limit` values have been added
since the last spill (so list-valued groups are bounded by rows, not keys), then are spilled to hash
partitions on disk; iteration merges one partition at a time.

On the demo nothing spills; on full MIMIC (tens of millions of lab specimens) memory stays flat.
"""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from typing import IO, Any, Generic, TypeVar

A = TypeVar("A")


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
        chunks: list[list[tuple[Hashable, A]]] = [[] for _ in range(self.partitions)]
        for key, value in self._mem.items():
            chunks[hash(key) % self.partitions].append((key, value))
        self._mem.clear()
        for handle, chunk in zip(self._files, chunks, strict=True):
            if chunk:
                pickle.dump(chunk, handle, protocol=pickle.HIGHEST_PROTOCOL)
        self._mem.clear()
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
                while True:
                    try:
                        chunk: Any = pickle.load(handle)
                    except EOFError:
                        break
                    for key, value in chunk:
                        current = merged.get(key)
                        merged[key] = value if current is None else self.merge(current, value)
                yield from merged.items()
                del merged
        finally:
            for handle in self._files:
                handle.close()
            self._tmp.cleanup()
            self._tmp = None
