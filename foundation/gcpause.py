"""Pause Python's cycle collector where a batch job starts: a mapping job, a bulk-load batch, an event
projection's batch, `rounds events load`, a benchmark's producer — never inside library code that a served
process runs (publishing, consuming, the store), because the collector is process-wide: a pause on one
thread turns it off for every request in flight.

Why batch jobs pause it: a batch of thousands of events or resources allocates a few dozen container objects
per item, nearly all acyclic and freed by reference counting when the batch ends. With the collector on,
those live objects trigger young-generation passes and get promoted, and every few batches a full collection
walks every object of the process (kafka-python, SQLAlchemy, pydantic): measured at 10-30 % of the CPU of such
jobs (benchmarks/README.md). Paused per batch, the garbage a batch may leave in cycles is bounded by the batch
and collected by the next automatic pass once the collector is back on.

A served process (`freeze_startup_heap`, called by `rounds serve`) never pauses: `gc_paused` does nothing
there, so a batch helper reached from a request cannot turn the collector off under the API.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_serving = False  # set by freeze_startup_heap: this process serves requests


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cycle collector for the block (nesting-safe: only the outermost block re-enables it);
    a no-op in a served process."""
    if _serving:
        yield
        return
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


YOUNG_THRESHOLD = 10_000  # allocations between young-generation passes (CPython's default: 700)


def freeze_startup_heap(young_threshold: int = YOUNG_THRESHOLD) -> None:
    """For a long-running server, once its app is built: move everything alive into the permanent generation,
    make young passes rarer, and keep the collector on from now on (`gc_paused` becomes a no-op).

    A server process holds ~150k long-lived objects (FastAPI, pydantic and fhir.resources models, SQLAlchemy,
    the search tables). Each full collection walked all of them while holding the GIL: measured 60-180 ms
    pauses of every request in flight on that worker (p99 material). Frozen objects are never scanned again;
    per-request garbage is still collected."""
    global _serving
    _serving = True
    gc.enable()
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(young_threshold, middle, old)
