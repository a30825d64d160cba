"""Group commit (the recorder's queue) and per-session sequences allocated for a batch: items queued while a
batch is applied form the next batch, in order; a failed batch fails each of its waiters and only them;
sequence numbers allocated for many sessions at once stay dense and unique under concurrency."""

from __future__ import annotations

import threading
import time
from concurrent.futures import wait

import pytest

from events.sequences import SessionSequences
from foundation.db import make_engine
from rounds.migrate import upgrade
from services.fhir_api.backbone.group_commit import GroupCommit


def test_items_queued_during_a_batch_form_the_next_batch_in_order() -> None:
    batches: list[list[int]] = []
    first_started = threading.Event()
    release = threading.Event()

    def apply(batch):
        batches.append(list(batch))
        first_started.set()
        release.wait(10)

    queue: GroupCommit[int] = GroupCommit(apply)
    futures = [queue.submit(0)]
    assert first_started.wait(10)
    futures += [queue.submit(i) for i in range(1, 50)]  # queued while batch [0] is being applied
    release.set()
    done, _ = wait(futures, timeout=10)
    assert len(done) == 50 and all(f.result() is None for f in futures)
    assert batches == [[0], list(range(1, 50))]
    queue.close()


def test_a_failed_batch_fails_its_own_waiters_only() -> None:
    def apply(batch):
        if 13 in batch:
            raise ConnectionError("broker down")

    queue: GroupCommit[int] = GroupCommit(apply)
    bad = queue.submit(13)
    with pytest.raises(ConnectionError):
        bad.result(10)
    assert queue.submit(14).result(10) is None
    queue.close()
    with pytest.raises(RuntimeError, match="closed"):
        queue.submit(15)


def test_close_applies_what_is_queued() -> None:
    seen: list[int] = []

    def apply(batch):
        time.sleep(0.05)
        seen.extend(batch)

    queue: GroupCommit[int] = GroupCommit(apply)
    futures = [queue.submit(i) for i in range(20)]
    queue.close()
    assert seen == list(range(20)) and all(f.done() for f in futures)


def test_sequences_for_many_sessions_at_once_are_dense_and_unique(database_url: str) -> None:
    upgrade(database_url)
    engine = make_engine(database_url)
    sequences = SessionSequences(engine)
    got: dict[str, list[int]] = {"s-a": [], "s-b": [], "s-c": []}
    lock = threading.Lock()

    def worker(order: list[str]) -> None:
        for _ in range(10):
            allocated = sequences.allocate_many({name: 2 for name in order})  # overlapping sessions
            with lock:
                for name, numbers in allocated.items():
                    got[name].extend(numbers)

    threads = [threading.Thread(target=worker, args=(order,))
               for order in (["s-a", "s-b"], ["s-b", "s-a", "s-c"], ["s-c", "s-a"], ["s-b"])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got["s-a"]) == list(range(1, 61)) and sorted(got["s-b"]) == list(range(1, 61))
    assert sorted(got["s-c"]) == list(range(1, 41))
    assert {name: sequences.last(name) for name in got} == {"s-a": 60, "s-b": 60, "s-c": 40}
    engine.dispose()
