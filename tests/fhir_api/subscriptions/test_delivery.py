"""Delivery behaviour on the SQL log (SQLite): handshake, matching with the server's search, payload contents,
base isolation, failures reflected in the status and retried, `off`, heartbeats, bad Subscriptions; the feed's
refusals."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest
from typer.testing import CliRunner

from events.bus import TopicSpec
from events.projections.retry import Backoff
from events.sql_log import SqlLog
from foundation.db import make_engine
from rounds.cli import app as cli
from rounds.migrate import upgrade
from services.fhir_api.subscriptions.delivery import FAILED, Delivery
from services.fhir_api.subscriptions.feed import FeedError, feed, parse_speed
from tests.fhir_api.conftest import LiveApi, observation, patient
from tests.fhir_api.subscriptions.conftest import HEARTBEAT_URL, Receiver, live_with_changes, subscription


@pytest.fixture
def world(sqlite_url: str) -> Iterator[tuple[LiveApi, Delivery]]:
    """A live API with the event backbone on SQLite + the SQL log, and a delivering consumer in a thread."""
    upgrade(sqlite_url)
    bus = SqlLog(make_engine(sqlite_url), rebalance_interval_s=0.1)
    topic = f"test.changes.{uuid.uuid4().hex[:8]}"
    bus.ensure_topics([TopicSpec(topic, 3)])
    with live_with_changes(sqlite_url, bus, topic) as (api, store):
        delivery = Delivery(store, bus, api.root, topic=topic, backoff=Backoff(0.05, 2.0, 0.2))
        runner = threading.Thread(target=delivery.run, daemon=True)
        runner.start()
        yield api, delivery
        delivery.stop.set()
        runner.join(timeout=10)
    bus.close()


def status_of(url: str) -> dict:
    return httpx.get(url).json()


def subscribe(base: str, criteria: str, receiver: Receiver, **kw) -> str:
    r = httpx.post(f"{base}/Subscription", json=subscription(criteria, receiver.url, **kw))
    assert r.status_code == 201, r.text
    url = f"{base}/Subscription/{r.json()['id']}"
    receiver.wait(lambda: status_of(url)["status"] in ("active", "error"), 20)
    return url


def test_matching_changes_are_notified_with_the_payload_asked_for(world, receiver):
    api, _ = world
    pid = httpx.post(f"{api.fhir}/Patient", json=patient("sub-a")).json()["id"]
    other = httpx.post(f"{api.fhir}/Patient", json=patient("sub-b")).json()["id"]
    full = subscribe(api.fhir, f"Observation?patient=Patient/{pid}&code=glu", receiver)
    assert status_of(full)["status"] == "active" and receiver.kinds() == ["handshake"]
    session = httpx.post(f"{api.root}/sessions", json={}).json()
    ids_only = subscribe(session["fhirBase"], "Observation?code=glu", receiver, content="id-only")
    httpx.post(f"{api.fhir}/Observation", json=observation(other, "glu", "2150-01-01T00:00:00Z"))  # other
    httpx.post(f"{api.fhir}/Observation", json=observation(pid, "na", "2150-01-01T00:00:00Z"))  # other code
    hit = httpx.post(f"{api.fhir}/Observation", json=observation(pid, "glu", "2150-01-01T00:00:00Z")).json()
    mine = httpx.post(f"{session['fhirBase']}/Observation",
                      json=observation(pid, "glu", "2150-01-02T00:00:00Z")).json()
    receiver.wait(lambda: len(receiver.notifications()) >= 2)
    notes = receiver.notifications()
    by_sub = {n["body"]["entry"][0]["resource"]["parameter"][0]["valueReference"]["reference"]: n
              for n in notes}
    assert set(by_sub) == {full, ids_only} and len(notes) == 2  # never the other base's writes
    assert by_sub[full]["body"]["entry"][1]["resource"]["id"] == hit["id"]
    focus = by_sub[ids_only]["body"]["entry"][1]
    assert focus["fullUrl"] == f"{session['fhirBase']}/Observation/{mine['id']}" and "resource" not in focus
    assert by_sub[full]["headers"]["X-Rounds-Event-Id"] != by_sub[ids_only]["headers"]["X-Rounds-Event-Id"]


def test_a_failing_endpoint_sets_error_is_retried_and_recovers(world, receiver):
    api, delivery = world
    pid = httpx.post(f"{api.fhir}/Patient", json=patient("sub-f")).json()["id"]
    url = subscribe(api.fhir, f"Observation?patient=Patient/{pid}", receiver)
    receiver.status = 503
    obs = httpx.post(f"{api.fhir}/Observation", json=observation(pid, "k", "2150-01-01T00:00:00Z")).json()
    receiver.wait(lambda: status_of(url)["status"] == "error", 20)
    assert status_of(url)["error"] == FAILED  # the same text for any failure (no reachability oracle)
    receiver.status = 200
    receiver.wait(lambda: len(receiver.notifications()) == 1, 20)
    assert receiver.notifications()[0]["body"]["entry"][1]["resource"]["id"] == obs["id"]
    receiver.wait(lambda: status_of(url)["status"] == "active", 20)


def test_off_releases_a_failing_subscription_and_a_refused_handshake_is_an_error(world, receiver):
    api, _ = world
    pid = httpx.post(f"{api.fhir}/Patient", json=patient("sub-o")).json()["id"]
    stuck = subscribe(api.fhir, f"Observation?patient=Patient/{pid}&code=x", receiver)
    receiver.status = 500
    httpx.post(f"{api.fhir}/Observation", json=observation(pid, "x", "2150-01-01T00:00:00Z"))
    receiver.wait(lambda: status_of(stuck)["status"] == "error", 20)
    doc = status_of(stuck) | {"status": "off"}
    assert httpx.put(stuck, json=doc).status_code == 200
    refused = subscribe(api.fhir, "Observation?code=y", receiver)  # handled once the stuck one is released
    assert status_of(refused)["status"] == "error" and FAILED in status_of(refused)["error"]
    bad = httpx.post(f"{api.fhir}/Subscription", json=subscription("not a search", receiver.url)).json()
    receiver.wait(lambda: status_of(f"{api.fhir}/Subscription/{bad['id']}")["status"] == "error", 20)


def test_heartbeats_when_nothing_happens(world, receiver):
    api, _ = world
    subscribe(api.fhir, "Observation?code=quiet", receiver,
              extension=[{"url": HEARTBEAT_URL, "valueUnsignedInt": 1}])
    receiver.wait(lambda: "heartbeat" in receiver.kinds(), 10)


def test_the_feed_refuses_what_it_cannot_do(world):
    api, delivery = world
    early, late = datetime(2150, 1, 1, tzinfo=UTC), datetime(2150, 1, 2, tzinfo=UTC)
    with pytest.raises(FeedError, match="no session"):
        feed(delivery.store, delivery.bus, "nope", early, late, 60)
    with pytest.raises(FeedError, match="after"):
        feed(delivery.store, delivery.bus, "nope", late, early, 60)  # backwards
    for bad in ("fast", "0x", "-3"):
        with pytest.raises(FeedError):
            parse_speed(bad)
    assert parse_speed("60x") == 60 and parse_speed("2.5") == 2.5
    db = str(delivery.store.engine.url)
    window = ["--from", "2150-01-01", "--to", "2150-01-02"]
    result = CliRunner().invoke(cli, ["feed", "--session", "nope", *window, "--database-url", db])
    assert result.exit_code == 2 and "no session" in result.output
    result = CliRunner().invoke(cli, ["feed", "--session", "x", "--from", "soon", "--to", "2150-01-02",
                                      "--database-url", db])
    assert result.exit_code == 2


def test_websocket_clients_bound_to_a_subscription_get_ping_and_bundle(sqlite_url, receiver):
    from websockets.sync.client import connect

    from services.fhir_api.subscriptions.websocket import WebSocketHub
    from tests.fhir_api.conftest import free_port

    upgrade(sqlite_url)
    bus = SqlLog(make_engine(sqlite_url), rebalance_interval_s=0.1)
    topic = f"test.changes.{uuid.uuid4().hex[:8]}"
    bus.ensure_topics([TopicSpec(topic, 3)])
    hub, port = WebSocketHub(), free_port()
    hub.serve("127.0.0.1", port)
    with live_with_changes(sqlite_url, bus, topic) as (api, store):
        delivery = Delivery(store, bus, api.root, topic=topic, websockets=hub)
        runner = threading.Thread(target=delivery.run, daemon=True)
        runner.start()
        try:
            doc = subscription("Observation?code=ws", "", content="id-only")
            doc["channel"] = {**doc["channel"], "type": "websocket"}
            doc["channel"].pop("endpoint")
            sub = httpx.post(f"{api.fhir}/Subscription", json=doc).json()
            url = f"{api.fhir}/Subscription/{sub['id']}"
            receiver.wait(lambda: status_of(url)["status"] == "active", 20)
            with connect(f"ws://127.0.0.1:{port}/ws") as socket:
                socket.send("hello")
                assert socket.recv(timeout=5).startswith("error")
                socket.send(f"bind {sub['id']}")
                assert socket.recv(timeout=5) == f"bound {sub['id']}"
                pid = httpx.post(f"{api.fhir}/Patient", json=patient("ws")).json()["id"]
                lab = observation(pid, "ws", "2150-01-01T00:00:00Z")
                obs = httpx.post(f"{api.fhir}/Observation", json=lab)
                assert socket.recv(timeout=10) == f"ping {sub['id']}"
                bundle = json.loads(socket.recv(timeout=5))
                assert bundle["entry"][1]["fullUrl"].endswith(f"/Observation/{obs.json()['id']}")
        finally:
            delivery.stop.set()
            runner.join(timeout=10)
            hub.stop()
    bus.close()


def test_the_topic_based_form_takes_its_filter_criteria(world, receiver):
    api, _ = world
    pid = httpx.post(f"{api.fhir}/Patient", json=patient("topic")).json()["id"]
    topic = "https://rounds.dev/fhir/SubscriptionTopic/lab-result"
    doc = subscription(topic, receiver.url, content="id-only")
    doc["_criteria"] = {"extension": [{"url": "http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/"
                                              "backport-filter-criteria",
                                       "valueString": f"Observation?patient=Patient/{pid}"}]}
    url = f"{api.fhir}/Subscription/{httpx.post(f'{api.fhir}/Subscription', json=doc).json()['id']}"
    receiver.wait(lambda: status_of(url)["status"] == "active", 20)
    httpx.post(f"{api.fhir}/Observation", json=observation(pid, "t", "2150-01-01T00:00:00Z"))
    receiver.wait(lambda: len(receiver.notifications()) == 1, 20)
    params = receiver.notifications()[0]["body"]["entry"][0]["resource"]["parameter"]
    assert {p["name"]: p for p in params}["topic"]["valueCanonical"] == topic
    unfiltered = httpx.post(f"{api.fhir}/Subscription", json=subscription(topic, receiver.url)).json()
    bad = f"{api.fhir}/Subscription/{unfiltered['id']}"
    receiver.wait(lambda: status_of(bad)["status"] == "error", 20)
    assert "backport-filter-criteria" in status_of(bad)["error"]


def test_criteria_the_search_refuses_are_an_error_and_never_stop_delivery(world, receiver):
    api, _ = world
    pid = httpx.post(f"{api.fhir}/Patient", json=patient("sub-c")).json()["id"]
    unknown = subscribe(api.fhir, f"Observation?patient=Patient/{pid}&colour=blue", receiver)
    bad_date = subscribe(api.fhir, f"Observation?patient=Patient/{pid}&date=yesterday", receiver)
    for url, said in ((unknown, "colour"), (bad_date, "yesterday")):
        assert status_of(url)["status"] == "error" and said in status_of(url)["error"]
    assert receiver.kinds() == []  # no handshake for a Subscription that cannot be served
    good = subscribe(api.fhir, f"Observation?patient=Patient/{pid}", receiver)
    assert status_of(good)["status"] == "active"
    for sub in (unknown, bad_date):  # set active again by hand: the change is matched, refused, error
        assert httpx.put(sub, json=status_of(sub) | {"status": "active"}).status_code == 200
    obs = httpx.post(f"{api.fhir}/Observation", json=observation(pid, "c", "2150-01-01T00:00:00Z")).json()
    receiver.wait(lambda: len(receiver.notifications()) == 1, 20)
    assert receiver.notifications()[0]["body"]["entry"][1]["resource"]["id"] == obs["id"]
    receiver.wait(lambda: status_of(unknown)["status"] == "error" == status_of(bad_date)["status"], 20)


def test_the_feed_runs_past_a_subscription_whose_criteria_the_search_refuses(world, receiver):
    api, delivery = world
    session = httpx.post(f"{api.root}/sessions", json={}).json()
    pid = httpx.post(f"{api.fhir}/Patient", json=patient("feed-c")).json()["id"]
    httpx.post(f"{api.fhir}/Observation", json=observation(pid, "f", "2150-01-01T12:00:00Z"))
    bad = subscribe(session["fhirBase"], "Observation?date=yesterday", receiver)
    assert status_of(bad)["status"] == "error"
    report = feed(delivery.store, delivery.bus, session["id"], datetime(2150, 1, 1, tzinfo=UTC),
                  datetime(2150, 1, 2, tzinfo=UTC), 86400, tick_s=0.5, types=["Observation"],
                  sleep=lambda _s: None, topic=delivery.topic)
    assert report.ticks == 2 and report.announced == 1
