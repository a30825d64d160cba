"""Subscriptions Backport IG gap detection: every status a receiver gets carries
`events-since-subscription-start`, every event its sequential `event-number`, and
`Subscription/{id}/$status` (GET and POST) answers the count — on the SQL log (SQLite), with the delivering
consumer in a thread (tests/fhir_api/subscriptions/test_feed_delivery.py shows the numbers across a kill
-9)."""

from __future__ import annotations

import httpx

from rounds.migrate import upgrade
from services.fhir_api.subscriptions.numbering import EventNumbers
from tests.fhir_api.conftest import assert_outcome, observation, patient
from tests.fhir_api.subscriptions.test_delivery import subscribe, world  # noqa: F401 - the fixture
from tests.wiring import store_on


def status(bundle: dict) -> dict[str, object]:
    """The subscription status's parameters by name (the first entry of a notification or $status)."""
    return {p["name"]: p for p in bundle["entry"][0]["resource"]["parameter"]}


def numbers(note: dict) -> tuple[str, str]:
    """(event-number, events-since-subscription-start) of a notification."""
    params = status(note["body"])
    event = {p["name"]: p for p in params["notification-event"]["part"]}
    return event["event-number"]["valueString"], params["events-since-subscription-start"]["valueString"]


def test_notifications_are_numbered_and_status_answers_the_count(world, receiver):  # noqa: F811
    api, _ = world
    pid = httpx.post(f"{api.fhir}/Patient", json=patient("numbered")).json()["id"]
    url = subscribe(api.fhir, f"Observation?patient=Patient/{pid}", receiver)
    handshake = receiver.posts[0]["body"]
    assert status(handshake)["events-since-subscription-start"]["valueString"] == "0"
    for day in range(1, 4):
        httpx.post(f"{api.fhir}/Observation", json=observation(pid, "k", f"2150-01-0{day}T00:00:00Z"))
    receiver.wait(lambda: len(receiver.notifications()) == 3)
    assert [numbers(n) for n in receiver.notifications()] == [("1", "1"), ("2", "2"), ("3", "3")]
    for answer in (httpx.get(f"{url}/$status"), httpx.post(f"{url}/$status")):
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["resourceType"] == "Bundle" and body["type"] == "searchset" and body["total"] == 1
        assert body["entry"][0]["search"]["mode"] == "match"
        params = status(body)
        assert params["type"]["valueCode"] == "query-status" and params["status"]["valueCode"] == "active"
        assert params["events-since-subscription-start"]["valueString"] == "3"
        assert params["subscription"]["valueReference"]["reference"] == url
        assert params["topic"]["valueCanonical"] == "Observation?"


def test_status_of_what_is_not_there(world, receiver):  # noqa: F811
    api, _ = world
    url = subscribe(api.fhir, "Observation?code=quiet-status", receiver)
    sub_id = url.rsplit("/", 1)[1]
    assert_outcome(httpx.get(f"{api.fhir}/Subscription/nope/$status"), 404)
    assert_outcome(httpx.get(f"{api.fhir}/Patient/{sub_id}/$status"), 404)
    session = httpx.post(f"{api.root}/sessions", json={}).json()
    assert_outcome(httpx.get(f"{session['fhirBase']}/Subscription/{sub_id}/$status"), 404)  # not its own
    fresh = httpx.get(f"{url}/$status").json()
    assert status(fresh)["events-since-subscription-start"]["valueString"] == "0"
    capability = httpx.get(f"{api.fhir}/metadata").json()["rest"][0]["resource"]
    ops = next(r for r in capability if r["type"] == "Subscription").get("operation", [])
    assert [o["name"] for o in ops] == ["status"]


def test_a_number_is_kept_for_its_event_and_the_next_follows_after_a_restart(sqlite_url):
    upgrade(sqlite_url)
    engine = store_on(sqlite_url).engine
    first = EventNumbers(engine)
    assert [first.number("", "s1", e) for e in ("e1", "e2", "e1")] == [1, 2, 1]
    assert first.number("sess", "s1", "e1") == 1  # another base's Subscription of the same id
    restarted = EventNumbers(engine)  # a new process: what was given is in the database
    assert restarted.number("", "s1", "e2") == 2 and restarted.number("", "s1", "e3") == 3
    assert restarted.since_start("", "s1") == 3 and restarted.since_start("", "other") == 0
    # one event for several Subscriptions at once: each its own next number, what was given kept
    assert restarted.number_all("", ["s1", "s2"], "e4") == {"s1": 4, "s2": 1}
    assert restarted.number_all("", ["s2", "s1"], "e4") == {"s1": 4, "s2": 1}


def test_status_reads_the_event_numbers_the_app_was_built_with(tmp_path):
    """`$status` answers from the EventNumbers the app factory was handed (the composition root's wiring),
    not from numbers it makes on the store's engine inside the route: here they are kept in another
    database, and only that one's count is reported."""
    from fastapi.testclient import TestClient

    from foundation.db import make_engine
    from rounds.settings import Settings
    from services.fhir_api.app import app_on_engine

    records, numbered = f"sqlite:///{tmp_path / 'records.db'}", f"sqlite:///{tmp_path / 'numbers.db'}"
    upgrade(records)
    upgrade(numbered)
    numbers = EventNumbers(make_engine(numbered))
    settings = Settings(database_url=records)
    with TestClient(app_on_engine(settings, make_engine(records), event_numbers=numbers)) as client:
        created = client.post("/fhir/Subscription", json={
            "resourceType": "Subscription", "status": "off", "reason": "wiring",
            "criteria": "Observation?code=wired", "channel": {"type": "rest-hook",
                                                              "endpoint": "http://127.0.0.1:9/hook"}})
        assert created.status_code == 201, created.text
        sub_id = created.json()["id"]
        assert status(client.get(f"/fhir/Subscription/{sub_id}/$status").json())[
            "events-since-subscription-start"]["valueString"] == "0"
        assert [numbers.number("", sub_id, f"e{i}") for i in range(1, 3)] == [1, 2]
        assert status(client.get(f"/fhir/Subscription/{sub_id}/$status").json())[
            "events-since-subscription-start"]["valueString"] == "2"
        assert EventNumbers(make_engine(records)).since_start("", sub_id) == 0  # the store's own: unused


def _rows(engine, subscription: str | None = None) -> int:
    from sqlalchemy import func, select

    from services.fhir_api.subscriptions.models import EVENTS

    where = EVENTS.c.subscription_id == subscription if subscription else EVENTS.c.number > 0
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(EVENTS).where(where)).scalar_one())


def test_pruned_numbers_stay_sequential_and_the_table_bounded(sqlite_url):
    """500 change events on one partition, committed 10 at a time with the last two still uncommitted: after
    each prune only the uncommitted events' rows and each Subscription's last number are left, the numbers
    go on 1, 2, 3 ... as if nothing were pruned, and an uncommitted event redelivered keeps its number."""
    upgrade(sqlite_url)
    engine = store_on(sqlite_url).engine
    numbers = EventNumbers(engine)
    legacy = numbers.number("", "old", "e0")  # numbered before revision 0021: no position, never pruned
    given: dict[str, list[int]] = {"s1": [], "s2": []}
    for offset in range(1, 501):
        subs = ["s1", "s2"] if offset % 2 else ["s1"]
        for sub, n in numbers.number_all("", subs, f"e{offset}", (0, offset)).items():
            given[sub].append(n)
        if offset % 10 == 0:
            numbers.prune(0, offset - 1)  # committed up to offset - 2: offsets offset-1, offset uncommitted
            assert _rows(engine, "s1") <= 3 and _rows(engine, "s2") <= 2, offset
    assert given["s1"] == list(range(1, 501)) and given["s2"] == list(range(1, 251))
    assert numbers.since_start("", "s1") == 500 and numbers.since_start("", "s2") == 250
    assert numbers.number("", "s1", "e500", (0, 500)) == 500  # redelivered after the prune: its own number
    assert numbers.number("", "s1", "e501", (0, 501)) == 501
    assert numbers.number("", "s3", "x1", (1, 5)) == 1  # another partition's rows are not that commit's
    assert numbers.prune(0, 10_000) == 2 and _rows(engine, "s3") == 1  # s1's 500 and 501's prior rows
    assert _rows(engine, "s1") == 1 and _rows(engine, "s2") == 1 and numbers.since_start("", "s1") == 501
    assert legacy == 1 and _rows(engine, "old") == 1
    numbers.forget("", "s1")  # deleted: its numbers go, and a new Subscription of that id starts again
    assert _rows(engine, "s1") == 0 and numbers.number("", "s1", "e502", (0, 502)) == 1


def test_the_delivering_consumer_prunes_what_it_committed_and_a_deleted_subscriptions_numbers(
        world, receiver):  # noqa: F811
    api, delivery = world
    http = httpx.Client(timeout=60)  # a busy machine's first writes are slow
    pid = http.post(f"{api.fhir}/Patient", json=patient("pruned")).json()["id"]
    url = subscribe(api.fhir, f"Observation?patient=Patient/{pid}", receiver)
    sub_id = url.rsplit("/", 1)[1]
    engine = delivery.numbers.engine
    for day in range(1, 6):
        http.post(f"{api.fhir}/Observation", json=observation(pid, "k", f"2150-01-0{day}T00:00:00Z"))
    receiver.wait(lambda: len(receiver.notifications()) == 5)
    receiver.wait(lambda: _rows(engine, sub_id) == 1, 20)  # committed: the last number alone is kept
    assert status(http.get(f"{url}/$status").json())["events-since-subscription-start"]["valueString"] == "5"
    http.post(f"{api.fhir}/Observation", json=observation(pid, "k", "2150-01-06T00:00:00Z"))
    receiver.wait(lambda: len(receiver.notifications()) == 6)
    assert [numbers(n)[0] for n in receiver.notifications()] == ["1", "2", "3", "4", "5", "6"]
    assert http.delete(url).status_code in (200, 204)
    receiver.wait(lambda: _rows(engine, sub_id) == 0, 20)
