"""One tenant's 50 failing Subscriptions (half answering 500 after their handshake, half hanging past the
client's timeout) against another tenant's delivery and the same tenant's healthy Subscription: each
notification of the victims must arrive, in its session's order, within a bound that does not grow with the
failing Subscriptions (each failing one retries on its own lane: services/fhir_api/subscriptions/lanes.py).
The figures (latency of every victim notification) are printed for benchmarks/README.md."""

from __future__ import annotations

import statistics
import time

import httpx

from tests.fhir_api.conftest import observation, patient
from tests.fhir_api.subscriptions.conftest import Receiver, serve_receiver, subscription
from tests.security.conftest import RETRY_S
from tests.security.tally import Tally

FAILING = 50
WRITES = 8
BOUND_S = 5.0  # a victim's notification, from the write's answer to its receipt (the relay polls, too)


def _active(url: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while httpx.get(url).json()["status"] != "active":
        assert time.monotonic() < deadline, httpx.get(url).json()
        time.sleep(0.05)


def _subscribe(base: str, criteria: str, endpoint: str) -> str:
    answer = httpx.post(f"{base}/Subscription", json=subscription(criteria, endpoint))
    assert answer.status_code == 201, answer.text
    return f"{base}/Subscription/{answer.json()['id']}"


def _latencies(receiver: Receiver, written: dict[str, float]) -> list[float]:
    got = [(n["body"]["entry"][1]["resource"]["id"], n["at"]) for n in receiver.notifications()]
    assert [id for id, _ in got] == list(written), "every one, in the session's order"
    return [at - written[id] for id, at in got]


def test_failing_subscriptions_of_one_tenant_do_not_delay_the_others(world, receiver):
    api, delivery, runner = world
    tally = Tally("subscription lanes")
    pid = httpx.post(f"{api.fhir}/Patient", json=patient("lanes")).json()["id"]
    criteria = f"Observation?patient=Patient/{pid}"
    attacker = httpx.post(f"{api.root}/sessions", json={}).json()
    victim = httpx.post(f"{api.root}/sessions", json={}).json()
    with serve_receiver() as failing, serve_receiver() as hanging, serve_receiver() as own:
        hostile = [_subscribe(attacker["fhirBase"], criteria, (failing if n % 2 else hanging).url)
                   for n in range(FAILING)]
        healthy_own = _subscribe(attacker["fhirBase"], criteria, own.url)
        healthy_victim = _subscribe(victim["fhirBase"], criteria, receiver.url)
        for url in [*hostile, healthy_own, healthy_victim]:
            _active(url)
        failing.status, hanging.delay_s = 500, 2.0  # handshakes accepted; from now on 500s and timeouts
        victim_written: dict[str, float] = {}
        own_written: dict[str, float] = {}
        for n in range(WRITES):
            for session, written in ((attacker, own_written), (victim, victim_written)):
                made = httpx.post(f"{session['fhirBase']}/Observation",
                                  json=observation(pid, f"lane-{n}", "2150-01-01T00:00:00Z"))
                written[made.json()["id"]] = time.monotonic()
            time.sleep(0.2)
        receiver.wait(lambda: len(receiver.notifications()) >= WRITES, 60)
        own.wait(lambda: len(own.notifications()) >= WRITES, 60)
        victim_lat, own_lat = _latencies(receiver, victim_written), _latencies(own, own_written)
        assert runner.is_alive()
    tally.attempts["failing notifications (subscriptions x events)"] += FAILING * WRITES  # none may delay
    for latency in victim_lat:
        tally.attempt("another tenant delayed", latency > BOUND_S, f"{latency:.2f} s")
    for latency in own_lat:
        tally.attempt("the same tenant's healthy one delayed", latency > BOUND_S, f"{latency:.2f} s")
    print(f"\nsubscription lanes: {FAILING} failing Subscriptions (retry budget {RETRY_S} s, timeout 0.5 s), "
          f"{WRITES} writes per tenant; another tenant's notification latency: median "
          f"{statistics.median(victim_lat):.2f} s, max {max(victim_lat):.2f} s; the same tenant's healthy "
          f"Subscription: median {statistics.median(own_lat):.2f} s, max {max(own_lat):.2f} s")
    tally.assert_none(at_least=FAILING * WRITES)
    for url in hostile:
        assert httpx.get(url).json()["status"] == "error"
