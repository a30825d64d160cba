"""How many store operations a FHIR API process runs at once (services/fhir_api/app.py: worker_threads)."""

from __future__ import annotations

import pytest

from rounds.migrate import upgrade
from services.fhir_api.app import worker_threads
from tests.wiring import store_on


@pytest.mark.postgres
def test_threads_default_to_the_pool_and_never_exceed_it(postgres_url) -> None:
    upgrade(postgres_url)
    store = store_on(postgres_url)
    try:
        steady = store.engine.pool.size()
        assert worker_threads(store) == steady
        assert worker_threads(store, 3) == 3
        assert worker_threads(store, steady + 40) == steady  # more would open a connection per request
        with pytest.raises(ValueError, match="at least 1"):
            worker_threads(store, 0)
    finally:
        store.engine.dispose()


def test_threads_on_sqlite_are_what_is_configured(sqlite_url) -> None:
    upgrade(sqlite_url)
    store = store_on(sqlite_url)
    assert worker_threads(store) is None  # anyio's default
    assert worker_threads(store, 4) == 4
