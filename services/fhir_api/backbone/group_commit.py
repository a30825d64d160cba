"""Group commit: one thread records the interactions of every request in flight together.

Recording an exchange costs round trips and commits (the session's sequence numbers, then the publish: a
transaction on the SQL log, an acknowledged produce on Kafka) that take about as long for a batch as for one
exchange. Requests hand their exchange to this queue and wait for its future; the thread takes everything
queued, records it as one batch, and resolves each future (or fails all of them with the batch's error).
Batches are recorded one at a time in the order they were queued, so one session's exchanges keep their order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Generic, TypeVar

Item = TypeVar("Item")


class GroupCommit(Generic[Item]):
    """Submit items from any thread; `apply(batch)` runs on one worker thread, started on first use."""

    def __init__(self, apply: Callable[[Sequence[Item]], None], *, max_batch: int = 256,
                 name: str = "group-commit") -> None:
        self.apply, self.max_batch, self.name = apply, max_batch, name
        self._pending: list[tuple[Item, Future]] = []
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, item: Item) -> Future:
        """Queue `item`; the future completes once its batch is applied (or holds the batch's error)."""
        future: Future = Future()
        with self._wake:
            if self._closed:
                raise RuntimeError(f"{self.name} is closed")
            self._pending.append((item, future))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            self._wake.notify()
        return future

    def close(self, timeout_s: float = 10.0) -> None:
        """Apply what is queued, then stop the thread."""
        with self._wake:
            self._closed = True
            self._wake.notify()
            thread = self._thread
        if thread is not None:
            thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._pending and not self._closed:
                    self._wake.wait()
                if not self._pending:
                    return
                batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch :]
            try:
                self.apply([item for item, _ in batch])
            except BaseException as exc:  # noqa: BLE001 - every waiter of the batch gets the error
                for _, future in batch:
                    future.set_exception(exc)
            else:
                for _, future in batch:
                    future.set_result(None)
