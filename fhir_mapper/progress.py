"""Byte-level progress for `rounds map`: readers report the compressed bytes they have consumed through a
hook; worker processes add to a shared counter that the parent polls to drive a rich progress bar."""

from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Callable
from typing import Any

_hook: Callable[[int], None] | None = None


def consumed(nbytes: int) -> None:
    """Called by readers as they advance through a file."""
    if _hook is not None and nbytes > 0:
        _hook(nbytes)


def set_hook(hook: Callable[[int], None] | None) -> None:
    global _hook
    _hook = hook


def shared_counter() -> Any:
    return multiprocessing.Value("q", 0)


def install_counter(counter: Any) -> None:
    """Worker-process initializer: count into the parent's shared counter."""

    def add(nbytes: int) -> None:
        with counter.get_lock():
            counter.value += nbytes

    set_hook(add)


class Bar:
    """A rich bar over the input bytes when stderr is a terminal; otherwise does nothing."""

    def __init__(self, total_bytes: int, jobs: int) -> None:
        self.enabled = sys.stderr.isatty()
        self.jobs, self.done = jobs, 0
        if self.enabled:
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(
                TextColumn("mapping {task.description}"),
                BarColumn(),
                DownloadColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
            )
            self._task = self._bar.add_task(f"0/{jobs} jobs", total=max(total_bytes, 1))
            self._bar.start()

    def advance(self, nbytes: int) -> None:
        if self.enabled:
            self._bar.advance(self._task, nbytes)

    def set(self, nbytes: int) -> None:
        if self.enabled:
            self._bar.update(self._task, completed=nbytes)

    def job_done(self, name: str) -> None:
        self.done += 1
        if self.enabled:
            self._bar.update(self._task, description=f"{self.done}/{self.jobs} jobs ({name} done)")

    def stop(self) -> None:
        if self.enabled:
            self._bar.stop()
