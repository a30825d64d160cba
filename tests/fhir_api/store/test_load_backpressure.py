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


def test_the_sqlite_writer_asks_what_is_stored_with_one_statement_whatever_the_batch(tmp_path) -> None:
    """pysqlite keeps a prepared statement per distinct SQL text (128 per connection, ~0.8 MB each at 5,000
    ids): an IN list as long as each batch made a new text for nearly every batch, and the writer's memory
    grew with the record until that cache was full. Batches of 12 different lengths must share one text."""
    from sqlalchemy import event

    from foundation.db import make_engine
    from rounds.migrate import upgrade
    from services.fhir_api import load as loader

    folder = tmp_path / "ndjson"
    folder.mkdir()
    for n in range(1, 13):  # a file of n Patients, one of n Observations: 24 batches of 12 lengths
        (folder / f"Patient{n:02}.ndjson").write_text(
            "".join(f'{{"resourceType":"Patient","id":"p{n}-{i}"}}\n' for i in range(n)))
        (folder / f"Observation{n:02}.ndjson").write_text("".join(
            f'{{"resourceType":"Observation","id":"o{n}-{i}","status":"final","code":{{"text":"x"}}}}\n'
            for i in range(n)))
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    engine = make_engine(url)
    asked: list[str] = []
    event.listen(engine, "before_cursor_execute",
                 lambda _c, _cur, sql, *_: asked.append(sql) if "res_id IN" in sql else None)
    try:
        first = loader.load_ndjson(engine, folder, workers=1)
        again = loader.load_ndjson(engine, folder, workers=1)  # every batch asks, and finds all stored
    finally:
        engine.dispose()
    assert (first.resources, first.skipped, again.resources, again.skipped) == (156, 0, 0, 156)
    assert len(asked) >= 48 and len(set(asked)) == 1
