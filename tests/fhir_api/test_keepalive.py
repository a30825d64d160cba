"""An unhandled error is a 500 OperationOutcome sent as an ordinary response, so the client's keep-alive
connection stays usable: one httpx.Client against a real uvicorn server, a failure injected into
the store on the fast lane (GET read), on the router (POST create, in the thread pool) and in a session, and
after each the next request goes out on the same TCP connection and succeeds."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from rounds.migrate import upgrade
from rounds.settings import Settings
from services.fhir_api.app import create_app
from tests.fhir_api.conftest import LiveApi, assert_outcome, patient, start_live
from tests.wiring import store_on

BOOM = "boom-0001"


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveApi]:
    """A live API whose store raises RuntimeError on reading Patient/boom-0001, on creating a Patient named
    Boom and on opening any transaction: bugs, not client errors."""
    url = f"sqlite:///{tmp_path_factory.mktemp('keepalive') / 'api.sqlite'}"
    upgrade(url)
    store = store_on(url)
    read_async, create = store.read_async, store.create

    async def broken_read(ctx, resource_type, id):
        if id == BOOM:
            raise RuntimeError("injected read failure")
        return await read_async(ctx, resource_type, id)

    def broken_create(ctx, resource, **kwargs):
        if resource.get("name", [{}])[0].get("family") == "Boom":
            raise RuntimeError("injected create failure")
        return create(ctx, resource, **kwargs)

    def broken_transaction(ctx):
        raise RuntimeError("injected transaction failure")

    store.read_async, store.create = broken_read, broken_create  # type: ignore[method-assign]
    store.transaction = broken_transaction  # type: ignore[method-assign]
    app = create_app(Settings(database_url=url), store)
    api, server, thread = start_live(app, store)
    yield api
    server.should_exit = True
    thread.join(timeout=10)


def local_port(response: httpx.Response) -> int:
    """The client-side port of the TCP connection the response came over."""
    return response.extensions["network_stream"].get_extra_info("client_addr")[1]


def test_a_500_keeps_the_connection(failing, caplog):
    with httpx.Client(base_url=failing.fhir, timeout=60) as client:
        ok = client.post("/Patient", json=patient("keepalive"))
        assert ok.status_code == 201, ok.text
        port = local_port(ok)
        stream = ok.extensions["network_stream"]
        failures = [
            lambda: client.get(f"/Patient/{BOOM}"),  # the fast lane
            lambda: client.post("/Patient", json=patient("keepalive", family="Boom")),  # the router
            lambda: client.get(f"/Patient/{BOOM}", params={"_summary": "data"}),
        ]
        for fail in failures:
            with caplog.at_level("ERROR"):
                broken = fail()
            body = assert_outcome(broken, 500)
            assert body["issue"][0]["code"] == "exception"
            assert "injected" not in broken.text  # no internals leak to the client
            assert broken.headers.get("connection", "").lower() != "close"
            after = client.get(f"/Patient/{ok.json()['id']}")
            assert after.status_code == 200
            assert local_port(broken) == local_port(after) == port  # the same TCP connection throughout
            assert after.extensions["network_stream"] is stream
        logged = [str(r.exc_info[1]) for r in caplog.records if r.exc_info]
        assert "injected read failure" in logged  # the server logs what the client is not told


def test_a_500_in_a_session_and_in_a_transaction_keeps_the_connection(failing):
    with httpx.Client(base_url=failing.root, timeout=60) as client:
        session = client.post("/sessions", json={"now": "2150-01-01"}).json()
        port = local_port(client.get("/health"))
        base = f"/sessions/{session['id']}/fhir"
        assert_outcome(client.get(f"{base}/Patient/{BOOM}"), 500)
        tx = {"resourceType": "Bundle", "type": "transaction", "entry": [
            {"resource": patient("keepalive"), "request": {"method": "POST", "url": "Patient"}}]}
        assert_outcome(client.post(base, json=tx), 500)
        after = client.get(f"{base}/Patient", params={"_count": 1})
        assert after.status_code == 200 and local_port(after) == port


def test_the_interaction_hook_records_the_500_the_client_got(failing):
    seen = []
    failing.app.state.interaction_listeners.append(seen.append)
    try:
        with httpx.Client(base_url=failing.fhir, timeout=60) as client:
            broken = client.get(f"/Patient/{BOOM}")
    finally:
        failing.app.state.interaction_listeners.clear()
    assert_outcome(broken, 500)
    [event] = [e for e in seen if e.path.endswith(BOOM)]
    assert event.status == 500 and b"".join(event.response_body) == broken.content


class BrokenListener:
    """A listener whose `wants` raises: a fault in the interaction middleware itself, outside every route."""

    def wants(self, method: str, path: str) -> bool:
        if path.endswith("/Patient/" + BOOM):
            raise RuntimeError("injected middleware failure")
        return False

    def __call__(self, _event) -> None:
        return None


def test_a_fault_in_a_middleware_layer_keeps_the_connection(failing):
    failing.app.state.interaction_listeners.append(BrokenListener())
    try:
        with httpx.Client(base_url=failing.fhir, timeout=60) as client:
            broken = client.get(f"/Patient/{BOOM}")
            after = client.get("/Patient", params={"_count": 1})
            assert_outcome(broken, 500)
            assert after.status_code == 200 and local_port(after) == local_port(broken)
    finally:
        failing.app.state.interaction_listeners.clear()
