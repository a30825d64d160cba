"""Pause Python's cycle collector around one batch of work (events, bulk-load lines, a mapping job).

Shared by the event backbone, the bulk loader (services/fhir_api/load.py) and the mapper
(fhir_mapper/pipeline.py, spill.py). For events:

A batch of thousands of events allocates a few dozen container objects per event (records, envelopes, payload
dicts, producer futures, rows), nearly all acyclic and freed by reference counting when the batch ends. With
the collector on, those live objects trigger young-generation passes and get promoted, and every few batches a
full collection walks every object of the process (kafka-python, SQLAlchemy, pydantic): measured at 10-30 %
of the CPU of producing and consuming, more the more objects a process holds. Paused per batch, the garbage
a batch may leave in cycles is bounded by the batch and collected by the next automatic pass once the
collector is back on. Consumers do not hold it while a poll waits for data (publishing holds it until its
batch is acknowledged), so the other threads of a process keep their collector.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cycle collector for the block (nesting-safe: only the outermost block re-enables it)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


YOUNG_THRESHOLD = 10_000  # allocations between young-generation passes (CPython's default: 700)


def freeze_startup_heap(young_threshold: int = YOUNG_THRESHOLD) -> None:
    """For a long-running server, once its app is built: move everything alive into the permanent generation
    and make young passes rarer.

    A server process holds ~150k long-lived objects (FastAPI, pydantic and fhir.resources models, SQLAlchemy,
    the search tables). Each full collection walked all of them while holding the GIL: measured 60-180 ms
    pauses of every request in flight on that worker (p99 material). Frozen objects are never scanned again;
    per-request garbage is still collected."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(young_threshold, middle, old)
