"""KafkaBus used from many threads at once (the simulator publishes from worker threads): its admin client,
which is not thread-safe, serves one thread at a time, the clients are made once, and a retriable admin error
(a broker connection not ready yet) is asked again instead of failing the publish."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from kafka.errors import NodeNotReadyError, TopicAuthorizationFailedError

from events.bus import UnknownTopic
from events.kafka_bus import ADMIN_ATTEMPTS, KafkaBus


class Admin:
    """Stands in for KafkaAdminClient: fails when two threads are inside it, or `failures` times."""

    def __init__(self, failures: int = 0, error: type[Exception] = NodeNotReadyError) -> None:
        self.inside, self.calls, self.failures, self.error = 0, 0, failures, error
        self.guard = threading.Lock()

    def list_topics(self) -> list[str]:
        with self.guard:
            self.inside += 1
            self.calls += 1
            concurrent, failing = self.inside > 1, self.calls <= self.failures
        try:
            time.sleep(0.02)  # long enough for every other thread to arrive
            if concurrent:
                raise NodeNotReadyError("No node_id provided")  # what the real client did
            if failing:
                raise self.error("not ready")
            return ["rounds.sessions"]
        finally:
            with self.guard:
                self.inside -= 1


class Producer:
    def partitions_for(self, topic: str) -> set[int]:
        return {0, 1, 2}


def bus_with(admin: Admin) -> KafkaBus:
    bus = KafkaBus("127.0.0.1:1")  # never contacted: the clients are stand-ins
    bus._admin, bus._producer = admin, Producer()
    return bus


def test_first_lookups_from_many_threads_ask_the_admin_client_one_at_a_time() -> None:
    admin = Admin()
    bus = bus_with(admin)
    with ThreadPoolExecutor(16) as pool:
        counts = list(pool.map(lambda _: bus._partition_count("rounds.sessions"), range(16)))
    assert counts == [3] * 16
    assert admin.calls == 1  # looked up once, then cached


def test_a_retriable_admin_error_is_asked_again() -> None:
    admin = Admin(failures=ADMIN_ATTEMPTS - 1)
    assert bus_with(admin)._partition_count("rounds.sessions") == 3
    assert admin.calls == ADMIN_ATTEMPTS


def test_errors_that_last_or_cannot_pass_are_raised() -> None:
    with pytest.raises(NodeNotReadyError):
        bus_with(Admin(failures=ADMIN_ATTEMPTS))._partition_count("rounds.sessions")
    fatal = Admin(failures=1, error=TopicAuthorizationFailedError)  # not retriable: raised at once
    with pytest.raises(TopicAuthorizationFailedError):
        bus_with(fatal)._partition_count("rounds.sessions")
    assert fatal.calls == 1
    with pytest.raises(UnknownTopic):
        bus_with(Admin())._partition_count("rounds.missing")
