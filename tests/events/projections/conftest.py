from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.events.projections.helpers import BACKENDS, Env, close_env, make_env


@pytest.fixture(params=BACKENDS)
def env(request: pytest.FixtureRequest) -> Iterator[Env]:
    """A bus + projection database on each backend: the SQL log on SQLite and on PostgreSQL, Kafka (projection
    database SQLite) on the real broker."""
    backend = request.param
    bootstrap = request.getfixturevalue("kafka_bootstrap") if backend == "kafka" else None
    url = request.getfixturevalue("postgres_url" if backend == "sql-postgres" else "sqlite_url")
    environment = make_env(backend, url, bootstrap)
    yield environment
    close_env(environment)
