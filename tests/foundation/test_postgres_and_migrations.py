"""Migrations run on SQLite and PostgreSQL, agree with the models, and the schema takes reads and writes."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import select
from sqlalchemy.orm import Session

from foundation.db import make_engine
from rounds.migrate import load_all_models, upgrade
from rounds.models import InstallationInfo


def test_migrations_match_models(database_url: str) -> None:
    upgrade(database_url)
    engine = make_engine(database_url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), load_all_models())
    engine.dispose()
    assert diff == [], f"models and migrations disagree: {diff}"


def test_upgrade_is_idempotent_and_read_write(database_url: str) -> None:
    upgrade(database_url)
    upgrade(database_url)
    engine = make_engine(database_url)
    with Session(engine) as session:
        session.add(InstallationInfo(key="dataset", value="mimic-iv-demo"))
        session.commit()
    with Session(engine) as session:
        row = session.scalars(select(InstallationInfo).where(InstallationInfo.key == "dataset")).one()
        assert row.value == "mimic-iv-demo"
        assert row.updated_at is not None
    engine.dispose()
    assert engine.dialect.name in ("sqlite", "postgresql")
