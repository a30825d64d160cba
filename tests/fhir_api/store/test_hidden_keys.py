"""The as-of views' reference probe (rows.hidden_keys) agrees with a read of each key, however many keys
and types one probe carries (they are split into statements by the driver's bound-value limit)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from services.fhir_api.store.interface import Context, Gone, NotFound
from services.fhir_api.store.rows import hidden_keys

SHARED = Context()
NOW = datetime(2150, 6, 1, tzinfo=UTC)


def _encounter(i: int) -> dict:
    year = 2140 + (i % 20)  # half before the session's clock, half after
    return {
        "resourceType": "Encounter",
        "status": "finished",
        "class": {"code": "IMP"},
        "period": {"start": f"{year}-01-01T00:00:00Z"},
    }


@pytest.fixture
def keys_and_session(store):
    with store.transaction(SHARED) as tx:  # one commit for the 1,130 rows, not one each
        keys = {("Encounter", tx.create(SHARED, _encounter(i)).id) for i in range(1100)}
        keys |= {("Patient", tx.create(SHARED, {"resourceType": "Patient"}).id) for _ in range(30)}
    ctx = store.get_session(store.create_session(NOW))
    mine = {("Patient", store.create(ctx, {"resourceType": "Patient"}).id) for _ in range(5)}
    gone = sorted(keys)[:40]
    for rtype, rid in gone:
        store.delete(ctx, rtype, rid)  # the session's tombstone hides a shared resource from it alone
    yield store, ctx, keys | mine | {("Patient", "never-stored")}, set(gone)
    store.drop_session(ctx.session_id)


def _seen_by_read(store, ctx: Context, key: tuple[str, str]) -> bool:
    try:
        store.read(ctx, *key)
    except (NotFound, Gone):
        return False
    return True


def test_the_probe_agrees_with_reads(keys_and_session) -> None:
    store, ctx, keys, gone = keys_and_session
    with store.engine.connect() as conn:
        hidden = hidden_keys(conn, ctx, keys)
    stored = keys - {("Patient", "never-stored")}
    expected = {key for key in stored if not _seen_by_read(store, ctx, key)}
    assert hidden == expected
    assert gone <= hidden  # tombstoned in the session
    assert len(hidden - gone) > 400  # and dated after the clock: several statements' worth of ids
    assert ("Patient", "never-stored") not in hidden  # not stored is not "hidden"
    with store.engine.connect() as conn:  # the shared record has no clock: only what is stored and live
        assert hidden_keys(conn, SHARED, keys) == set()
