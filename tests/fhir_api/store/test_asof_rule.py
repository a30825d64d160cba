"""The as-of rule is written once (store/asof.py `CLOCK`, over the times known_time.json gives each type) and
every path applies the same rule: the SQL and the Python compiled from it agree row by row, and for every
resource type a shared resource dated after a session's clock is hidden (or, for the types the rule gives no
known time, shown) alike by a read (Python), a search (SQL), a search by a reference to it (reference rows
dated in SQL by store/timing.py) and the as-of view of a resource referring to it (store/rows.py
`hidden_keys`). Two lists of the types without a known time that differed (PractitionerRole once had a clock
in Python and none in SQL) fail here."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import product

import orjson
import pytest
from sqlalchemy import BigInteger, Column, MetaData, Table, create_engine, insert, select

from services.fhir_api.search.registry import resource_types
from services.fhir_api.search.values import to_us
from services.fhir_api.store import asof
from services.fhir_api.store.interface import Context, NotFound, SearchRequest
from services.fhir_api.store.known_time import ELEMENTS, UNTIMED

SHARED = Context()
NOW = datetime(2150, 1, 1, tzinfo=UTC)
LATER = "2200-01-01T00:00:00Z"  # after the clock
EARLIER = "2100-01-01T00:00:00Z"


@pytest.mark.parametrize("kind", sorted(asof.CLOCK))
def test_the_sql_and_the_python_compiled_from_the_clock_agree(kind: str) -> None:
    now = to_us(NOW)
    columns = [col for col, _ in asof.CLOCK[kind]]
    table = Table("rows", MetaData(), Column("n", BigInteger, primary_key=True),
                  *(Column(col, BigInteger) for col in columns))
    values = (None, now - 1, now, now + 1)
    rows = [dict(zip(["n", *columns], (n, *combo), strict=True))
            for n, combo in enumerate(product(values, repeat=len(columns)))]
    engine = create_engine("sqlite://")
    table.metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(insert(table), rows)
        by_sql = set(conn.execute(select(table.c.n).where(asof.sql_clock(kind, table, now))).scalars())
        fetched = conn.execute(select(table)).all()
    shows = asof.python_clock(kind)
    assert {row.n for row in fetched if shows(row, now)} == by_sql
    assert 0 < len(by_sql) < len(rows)  # the clock hides some rows and shows others


def _dated_everywhere(resource_type: str) -> dict:
    """A resource carrying every clinical-time element of the rule, all after the clock."""
    body: dict = {"resourceType": resource_type, "id": "x"}
    for steps in ELEMENTS.values():
        node = body
        for _, name, *_ in steps[:-1]:
            node = node.setdefault(name, {})
        kind, name, *_ = steps[-1]
        key = f"{name}DateTime" if kind == "c" else name
        node[key] = {"start": LATER} if key == "period" else LATER
    return body


def test_every_type_is_hidden_or_shown_alike_on_every_path(store) -> None:
    store.validate = False  # bodies with every dated element, whatever their type declares
    types = sorted(set(resource_types()) | set(UNTIMED))
    for rtype in types:
        store.update(SHARED, rtype, "x", _dated_everywhere(rtype))
        audit = {"resourceType": "AuditEvent", "id": f"a-{rtype}", "recorded": EARLIER,
                 "entity": [{"what": {"reference": f"{rtype}/x"}}]}
        store.update(SHARED, "AuditEvent", audit["id"], audit)
    clocked = store.get_session(store.create_session(NOW))
    seen = {}
    for rtype in types:
        try:
            store.read(clocked, rtype, "x")
            read = True
        except NotFound:
            read = False
        searched = bool(store.search(clocked, SearchRequest(rtype, [("_id", "x")])).matches)
        by_reference = store.search(clocked, SearchRequest("AuditEvent", [("entity", f"{rtype}/x")])).matches
        referrer = orjson.loads(store.read(clocked, "AuditEvent", f"a-{rtype}").raw)
        kept = any("what" in entity for entity in referrer.get("entity", ()))  # a view strips hidden ones
        seen[rtype] = (read, searched, [m.id for m in by_reference] == [f"a-{rtype}"], kept)
    expected = {rtype: (rtype in UNTIMED,) * 4 for rtype in types}
    assert seen == expected
    assert {"PractitionerRole", "Practitioner", "Patient"} <= set(UNTIMED) and "Observation" not in UNTIMED
