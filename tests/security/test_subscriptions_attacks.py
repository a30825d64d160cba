"""Attacks on Subscriptions (issue 38, items 4-7): one tenant's endpoint stopping or delaying delivery for
the others, server-side requests outside the operator's allow-list, credential headers, a reachability oracle
in `Subscription.error`, `channel.header` secrets read back, and session tokens reading the shared record's
Subscriptions. Every attempt is counted (ATTEMPTS, printed with -s) and must fail."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest

from events.bus import TopicSpec
from events.sql_log import SqlLog
from foundation.db import make_engine
from rounds.migrate import upgrade
from services.fhir_api.store.interface import StoredResource
from services.fhir_api.subscriptions.delivery import FAILED, Delivery
from services.fhir_api.subscriptions.endpoints import EndpointPolicy
from services.fhir_api.subscriptions.subscription import BadSubscription, parse
from tests.fhir_api.conftest import free_port, observation, patient
from tests.fhir_api.subscriptions.conftest import live_with_changes, serve_receiver, subscription
from tests.security.conftest import RETRY_S

ATTEMPTS: Counter[str] = Counter()


def _sub(base: str, doc: dict) -> str:
    r = httpx.post(f"{base}/Subscription", json=doc)
    assert r.status_code == 201, r.text
    return f"{base}/Subscription/{r.json()['id']}"


def _planted(api, session: dict, doc: dict) -> str:
    """The Subscription on the session's base: through the API, or — what the API refuses at the write
    (422), as a row written before that rule or under a wider policy would be — straight into the store, so
    delivery still meets it."""
    r = httpx.post(f"{session['fhirBase']}/Subscription", json=doc)
    if r.status_code == 422:
        stored = api.store.create(api.store.get_session(session["id"]), doc)
        return f"{session['fhirBase']}/Subscription/{stored.id}"
    assert r.status_code == 201, r.text
    return f"{session['fhirBase']}/Subscription/{r.json()['id']}"


def _settled(url: str, timeout_s: float = 20) -> dict:
    deadline = time.monotonic() + timeout_s
    while (doc := httpx.get(url).json())["status"] == "requested":
        assert time.monotonic() < deadline, doc
        time.sleep(0.05)
    return doc


def _hostile_docs(criteria: str, good: str, failing: str, slow: str) -> dict[str, dict]:
    """One Subscription per way an endpoint (or what a client asks delivery to send) can misbehave."""
    closed = f"http://127.0.0.1:{free_port()}/hook"

    def with_headers(*lines: str) -> dict:
        return subscription(criteria, good, header=list(lines))

    return {
        "malformed-url": subscription(criteria, "http://[::1/x"),
        "bad-port": subscription(criteria, "http://127.0.0.1:99999/x"),
        "non-ascii-header": with_headers("X-Note: café"),
        "newline-header": with_headers("X-Note: a\r\nX-Injected: 1"),
        "authorization-header": with_headers("Authorization: Bearer stolen"),
        "host-header": with_headers("Host: metadata.internal"),
        "cookie-header": with_headers("Cookie: sid=1"),
        "forwarded-header": with_headers("X-Forwarded-For: 10.0.0.1"),
        "metadata-ssrf": subscription(criteria, "http://169.254.169.254/latest/meta-data/"),
        "private-ssrf": subscription(criteria, "http://10.0.0.1:5432/"),
        "credentials-in-url": subscription(criteria, good.replace("http://", "http://user:pw@")),
        "refused": subscription(criteria, closed),
        "5xx": subscription(criteria, failing),
        "timeout": subscription(criteria, slow),
    }


def test_no_endpoint_stops_or_holds_back_another_sessions_delivery(world, receiver):
    api, delivery, runner = world
    with serve_receiver(status=500) as failing, serve_receiver(delay_s=2.0) as slow:
        pid = httpx.post(f"{api.fhir}/Patient", json=patient("iso")).json()["id"]
        victim = httpx.post(f"{api.root}/sessions", json={}).json()
        attacker = httpx.post(f"{api.root}/sessions", json={}).json()
        criteria = f"Observation?patient=Patient/{pid}"
        hostile = {name: _planted(api, attacker, doc)
                   for name, doc in _hostile_docs(criteria, receiver.url, failing.url, slow.url).items()}
        ATTEMPTS["subscriptions: hostile endpoints and headers"] += len(hostile)
        # a handshake accepted, then every notification refused
        with serve_receiver() as turncoat:
            betrayer = _sub(attacker["fhirBase"], subscription(criteria, turncoat.url))
            assert _settled(betrayer)["status"] == "active"
            turncoat.status = 500
            ATTEMPTS["subscriptions: handshake then failures"] += 1
            for url in hostile.values():
                _settled(url)
            mine = _sub(victim["fhirBase"], subscription(criteria, receiver.url))
            assert _settled(mine)["status"] == "active"
            for n in range(3):  # the attacker's session writes too: its endpoints fail on each
                httpx.post(f"{attacker['fhirBase']}/Observation",
                           json=observation(pid, f"a{n}", "2150-01-01T00:00:00Z"))
            started = time.monotonic()
            written = [httpx.post(f"{victim['fhirBase']}/Observation",
                                  json=observation(pid, f"v{n}", "2150-01-01T00:00:00Z")).json()["id"]
                       for n in range(5)]
            receiver.wait(lambda: len(receiver.notifications()) >= 5, 30)
            took = time.monotonic() - started
            got = [n["body"]["entry"][1]["resource"]["id"] for n in receiver.notifications()]
            assert got == written  # every one, in the session's order
            # at most the failing Subscriptions' own retry budgets once each (3 partitions), never per event
            assert took < 3 * RETRY_S * 4 + 5, took
            assert runner.is_alive()
            for name, url in {**hostile, "turncoat": betrayer}.items():
                doc = _settled(url)
                assert doc["status"] == "error", (name, doc)
            assert {"X-Note", "Authorization", "Host", "Cookie"}.isdisjoint(
                {h for p in receiver.posts for h in p["headers"] if p["headers"].get("X-Note") is not None})
            assert all(p["headers"].get("Authorization") is None for p in receiver.posts)


REFUSED_AT_WRITE = ("malformed-url", "bad-port", "non-ascii-header", "newline-header", "authorization-header",
                    "host-header", "cookie-header", "forwarded-header", "metadata-ssrf", "private-ssrf",
                    "credentials-in-url")


def _refused(answer: httpx.Response) -> bool:
    """A 422 OperationOutcome (anything else lets the write through, or fails otherwise)."""
    return answer.status_code == 422 and answer.json()["resourceType"] == "OperationOutcome"


def test_bad_endpoints_and_headers_are_refused_at_the_write(plain_api, receiver):
    """Create, update, conditional update, patch, batch and transaction: each hostile endpoint or header is a
    422 OperationOutcome, nothing stored; a good Subscription is written, and `off` is always writable."""
    api = plain_api
    criteria = "Observation?code=w"
    docs = _hostile_docs(criteria, receiver.url, receiver.url, receiver.url)
    session = httpx.post(f"{api.root}/sessions", json={}).json()
    for base in (api.fhir, session["fhirBase"]):
        good = httpx.post(f"{base}/Subscription", json=subscription(criteria, receiver.url))
        assert good.status_code == 201, good.text
        url, before = f"{base}/Subscription/{good.json()['id']}", good.json()
        for name in REFUSED_AT_WRITE:
            doc = docs[name]
            tries = {
                "create": httpx.post(f"{base}/Subscription", json=doc),
                "update": httpx.put(url, json=doc | {"id": before["id"]}),
                "conditional update": httpx.put(f"{base}/Subscription", params={"_id": before["id"]},
                                                json=doc | {"id": before["id"]}),
                "patch": httpx.patch(url, json=[{"op": "replace", "path": "/channel",
                                                 "value": doc["channel"]}],
                                     headers={"Content-Type": "application/json-patch+json"}),
            }
            for kind in ("batch", "transaction"):
                bundle = {"resourceType": "Bundle", "type": kind, "entry": [
                    {"request": {"method": "POST", "url": "Subscription"}, "resource": doc}]}
                answer = httpx.post(base, json=bundle)
                entry = answer.json()["entry"][0]["response"] if kind == "batch" else None
                refused = (entry["status"].startswith("422") if entry else _refused(answer))
                ATTEMPTS["subscriptions: refused at the write"] += 1
                assert refused, (name, kind, answer.text[:300])
            for kind, answer in tries.items():
                ATTEMPTS["subscriptions: refused at the write"] += 1
                assert _refused(answer), (name, kind, answer.status_code, answer.text[:300])
                assert "channel" in answer.json()["issue"][0]["diagnostics"], answer.text
        assert httpx.get(url).json()["meta"]["versionId"] == before["meta"]["versionId"]  # nothing stored
        stored = httpx.get(f"{base}/Subscription", params={"_count": 100}).json().get("entry", [])
        assert [e["resource"]["id"] for e in stored] == [before["id"]]
        off = httpx.put(url, json=docs["metadata-ssrf"] | {"id": before["id"], "status": "off"})
        assert off.status_code == 200, off.text  # switching off is never refused


def test_errors_do_not_tell_what_the_server_can_reach(world, receiver):
    api, _, _ = world
    with serve_receiver(status=404) as missing, serve_receiver(delay_s=2.0) as slow:
        targets = {"refused": f"http://127.0.0.1:{free_port()}/x", "404": missing.url, "timeout": slow.url}
        errors = {}
        for name, url in targets.items():
            errors[name] = _settled(_sub(api.fhir, subscription("Observation?code=o", url)))["error"]
            ATTEMPTS["subscriptions: reachability oracle"] += 1
        assert len(set(errors.values())) == 1 and FAILED in errors["404"], errors


def test_a_session_writes_order_behind_its_subscription(world, receiver):
    api, _, _ = world
    session = httpx.post(f"{api.root}/sessions", json={}).json()
    pid = httpx.post(f"{api.fhir}/Patient", json=patient("order")).json()["id"]
    for _ in range(5):  # the write right after the Subscription's is notified (same partition, after it)
        sub = _sub(session["fhirBase"], subscription(f"Observation?patient=Patient/{pid}", receiver.url))
        before = len(receiver.notifications())
        httpx.post(f"{session['fhirBase']}/Observation", json=observation(pid, "o", "2150-01-01T00:00:00Z"))
        receiver.wait(lambda b=before: len(receiver.notifications()) > b, 20)
        assert httpx.put(sub, json=httpx.get(sub).json() | {"status": "off"}).status_code == 200


ENDPOINTS = {  # endpoint -> allowed by the default policy
    "http://127.0.0.1:8080/hook": True, "http://localhost/x": True, "https://[::1]:9/x": True,
    "http://api:8080/x": True, "http://simulator/x": True,
    "http://169.254.169.254/": False, "http://10.0.0.1/": False, "http://example.org/": False,
    "http://127.0.0.1.nip.io/": False, "http://localhost.evil.org/": False, "http://[::1/x": False,
    "ftp://127.0.0.1/": False, "http://u:p@127.0.0.1/": False, "http://postgres:5432/": False,
    "http://kafka:9092/": False, "http:///nohost": False, "http://0.0.0.0/": False,
    "http://2130706433/": False, "http://0x7f000001/": False,
}


def _parsed(endpoint: str, *headers: str):
    doc = subscription("Observation?code=x", endpoint, header=list(headers))
    return parse(StoredResource("Subscription", "s1", 1, datetime.now(UTC), b""), doc)


@pytest.mark.parametrize("endpoint,allowed", sorted(ENDPOINTS.items()))
def test_the_allow_list_decides_every_endpoint(endpoint: str, allowed: bool):
    ATTEMPTS["subscriptions: endpoint allow-list"] += 0 if allowed else 1
    policy = EndpointPolicy.of()
    try:
        policy.check(_parsed(endpoint))
        assert allowed, endpoint
    except BadSubscription:
        assert not allowed, endpoint


def test_the_operator_sets_the_hosts_and_header_names():
    policy = EndpointPolicy.of("hooks.internal:8443", "X-Api-Key")
    policy.check(_parsed("https://hooks.internal:8443/in", "X-Api-Key: k"))
    for endpoint, headers in (("https://hooks.internal/in", ()), ("http://127.0.0.1/", ()),
                              ("https://hooks.internal:8443/in", ("X-Other: 1",)),
                              ("https://hooks.internal:8443/in", ("Authorization: Bearer t",))):
        ATTEMPTS["subscriptions: endpoint allow-list"] += 1
        with pytest.raises(BadSubscription):
            policy.check(_parsed(endpoint, *headers))


SECRET = "X-Api-Key: s3cret-of-the-receiver"


def _bodies_of_every_reader(base: str, sub_id: str, client: httpx.Client) -> dict[str, httpx.Response]:
    """Each way a reader can get a Subscription back: read, vread, search (+ _elements), both histories,
    a batch GET, and a write's returned representation."""
    current = client.get(f"{base}/Subscription/{sub_id}")
    version = current.json().get("meta", {}).get("versionId", "1") if current.status_code == 200 else "1"
    batch = {"resourceType": "Bundle", "type": "batch",
             "entry": [{"request": {"method": "GET", "url": f"Subscription/{sub_id}"}},
                       {"request": {"method": "GET", "url": "Subscription?status=requested,off"}}]}
    answers = {
        "read": current,
        "vread": client.get(f"{base}/Subscription/{sub_id}/_history/{version}"),
        "search": client.get(f"{base}/Subscription"),
        "search-elements": client.get(f"{base}/Subscription", params={"_elements": "channel"}),
        "instance-history": client.get(f"{base}/Subscription/{sub_id}/_history"),
        "type-history": client.get(f"{base}/Subscription/_history"),
        "system-history": client.get(f"{base}/_history"),
        "batch": client.post(base, json=batch),
    }
    if current.status_code == 200:
        doc = current.json() | {"reason": "touched"}
        answers["write-representation"] = client.put(f"{base}/Subscription/{sub_id}", json=doc,
                                                     headers={"Prefer": "return=representation"})
    return answers


@pytest.fixture
def plain_api(database_url: str) -> Iterator:
    from tests.fhir_api.conftest import live_api

    yield from live_api(database_url)


def test_channel_header_is_never_returned_and_sessions_never_see_the_records_subscriptions(plain_api):
    api = plain_api
    with httpx.Client(timeout=30) as client:
        shared = client.post(f"{api.fhir}/Subscription",
                             json=subscription("Observation?code=s", "http://127.0.0.1:1/h", header=[SECRET]))
        assert shared.status_code == 201 and "s3cret" not in shared.text
        shared_id = shared.json()["id"]
        kept = api.store.read(_ctx(), "Subscription", shared_id).raw
        assert b"s3cret" in kept  # stored for delivery, only never served
        session = client.post(f"{api.root}/sessions", json={}).json()
        own = client.post(f"{session['fhirBase']}/Subscription",
                          json=subscription("Observation?code=s", "http://127.0.0.1:1/h", header=[SECRET]))
        assert own.status_code == 201 and "s3cret" not in own.text
        for base, sub_id in ((api.fhir, shared_id), (session["fhirBase"], own.json()["id"])):
            for way, answer in _bodies_of_every_reader(base, sub_id, client).items():
                ATTEMPTS["subscriptions: channel.header read back"] += 1
                assert answer.status_code < 500, (way, answer.text)
                assert "s3cret" not in answer.text and "X-Api-Key" not in answer.text, (base, way)
        # the session asks for the shared record's Subscription every way it can
        for way, answer in _bodies_of_every_reader(session["fhirBase"], shared_id, client).items():
            ATTEMPTS["subscriptions: session reads the record's Subscriptions"] += 1
            assert answer.status_code < 500 and f'"id":"{shared_id}"' not in answer.text, (way, answer.text)


def test_a_websocket_binds_only_with_a_token_of_the_subscriptions_base(sqlite_url):
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    from services.fhir_api.auth.revocation import Revocations
    from services.fhir_api.auth.scopes import parse_scopes
    from services.fhir_api.auth.tokens import issue, signing_key, verify
    from services.fhir_api.subscriptions.endpoints import session_binder, token_base
    from services.fhir_api.subscriptions.websocket import WebSocketHub

    key = signing_key(None, "k" * 40)
    other_key = signing_key(None, "o" * 40)
    upgrade(sqlite_url)
    revocations = Revocations(make_engine(sqlite_url))
    base_of = token_base(key, revocations)
    bus = SqlLog(make_engine(sqlite_url), rebalance_interval_s=0.1)
    topic = f"test.changes.{uuid.uuid4().hex[:8]}"
    bus.ensure_topics([TopicSpec(topic, 3)])
    port = free_port()
    with live_with_changes(sqlite_url, bus, topic) as (api, store):
        hub = WebSocketHub(session_binder(store, base_of), recheck_s=0.2)
        hub.serve("127.0.0.1", port)
        delivery = Delivery(store, bus, api.root, topic=topic, websockets=hub)
        runner = threading.Thread(target=delivery.run, daemon=True)
        runner.start()
        try:
            a, b = (httpx.post(f"{api.root}/sessions", json={}).json() for _ in range(2))
            doc = subscription("Observation?code=ws", "", content="id-only")
            channel = {k: v for k, v in doc["channel"].items() if k != "endpoint"}
            doc["channel"] = channel | {"type": "websocket"}
            sub_a = _settled(_sub(a["fhirBase"], doc))["id"]
            shared = _settled(_sub(api.fhir, doc))["id"]
            scopes = parse_scopes("patient/*.rs")
            token = {name: issue(key, scopes, expires_in=600, session=s["id"])
                     for name, s in (("a", a), ("b", b))}
            wrong_key = issue(other_key, scopes, expires_in=600, session=a["id"])
            revoked = issue(key, scopes, expires_in=600, session=a["id"])  # a's, revoked (RFC 7009)
            revocations.revoke(verify(key, revoked).jti, int(time.time()) + 600)
            with connect(f"ws://127.0.0.1:{port}/ws") as socket:
                for attempt in (f"bind {sub_a}", f"bind {sub_a} {token['b']}", f"bind {sub_a} garbage",
                                f"bind {sub_a} {wrong_key}", f"bind {shared} {token['a']}",
                                f"bind {uuid.uuid4()} {token['a']}", f"bind {sub_a} {revoked}"):
                    ATTEMPTS["subscriptions: websocket bind"] += 1
                    socket.send(attempt)
                    refused = "error this socket may not bind that subscription"
                    assert socket.recv(timeout=5) == refused, attempt
                socket.send(f"bind {sub_a} {token['a']}")
                assert socket.recv(timeout=5) == f"bound {sub_a}"
                spare = issue(key, scopes, expires_in=600, session=a["id"])
                with connect(f"ws://127.0.0.1:{port}/ws") as other:  # bound, then its token is revoked
                    other.send(f"bind {sub_a} {spare}")
                    assert other.recv(timeout=5) == f"bound {sub_a}"
                    revocations.revoke(verify(key, spare).jti, int(time.time()) + 600)
                    ATTEMPTS["subscriptions: websocket after its token was revoked"] += 1
                    with pytest.raises(ConnectionClosed) as closed:
                        while True:
                            other.recv(timeout=5)
                    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
                pid = httpx.post(f"{api.fhir}/Patient", json=patient("ws-a")).json()["id"]
                lab = observation(pid, "ws", "2150-01-01T00:00:00Z")
                httpx.post(f"{b['fhirBase']}/Observation", json=lab)
                mine = httpx.post(f"{a['fhirBase']}/Observation",
                                  json=observation(pid, "ws", "2150-01-01T00:00:00Z")).json()
                assert socket.recv(timeout=10) == f"ping {sub_a}"
                assert socket.recv(timeout=5).count(mine["id"]) >= 1
                # the session ends: the bound socket is closed, and its token binds nothing any more
                assert httpx.post(f"{api.root}/sessions/{a['id']}/end").status_code < 300
                ATTEMPTS["subscriptions: websocket after the session ended"] += 1
                with pytest.raises(ConnectionClosed) as closed:
                    while True:
                        socket.recv(timeout=5)  # nothing but the close may come now
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
            with connect(f"ws://127.0.0.1:{port}/ws") as socket:
                ATTEMPTS["subscriptions: websocket after the session ended"] += 1
                socket.send(f"bind {sub_a} {token['a']}")
                assert socket.recv(timeout=5) == "error this socket may not bind that subscription"
        finally:
            delivery.stop.set()
            runner.join(timeout=10)
            hub.stop()
    bus.close()


def _ctx():
    from services.fhir_api.store.interface import Context

    return Context()


def test_zz_attempts_counted(capsys):
    with capsys.disabled():
        print("\nsubscription attack attempts:", dict(ATTEMPTS))
