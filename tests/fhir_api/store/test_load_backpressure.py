"""The loader's pool runs at most a window of batches ahead of the writer (`load.bounded`): with `Pool.imap`
every batch was read and parsed ahead of SQLite's single writer, so the load held the whole record."""

from __future__ import annotations

import multiprocessing

import pytest

from services.fhir_api.load_files import bounded


def _square(x: int) -> int:
    return x * x


def test_the_pool_never_runs_more_than_the_window_ahead() -> None:
    pulled = []

    def jobs():
        for i in range(50):
            pulled.append(i)
            yield i

    with multiprocessing.get_context("fork").Pool(2) as pool:
        results = []
        for result in bounded(pool, _square, jobs(), 4):
            assert len(pulled) - len(results) <= 4  # submitted and not taken back yet
            results.append(result)
    assert results == [i * i for i in range(50)]  # in order, every job once


def test_a_failing_batch_raises_in_the_caller() -> None:
    with multiprocessing.get_context("fork").Pool(2) as pool:
        out = bounded(pool, _square, iter([1, "x", 3]), 2)
        assert next(out) == 1
        with pytest.raises(TypeError):
            next(out)
