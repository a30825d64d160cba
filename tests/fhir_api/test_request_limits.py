"""Over-long URLs and headers against a real uvicorn: every refusal is a 414 / 431 (400 for
a malformed head) with an OperationOutcome body, never a plain-text answer or a reset connection; requests
just under the stated limits are served. Both HTTP parsers uvicorn may run (httptools, h11), both backends."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest

from services.fhir_api.http import protocol
from services.fhir_api.limits import HEAD_CAP, MAX_HEADER_BYTES, MAX_HEADER_FIELDS, MAX_URL_BYTES
from tests.fhir_api import conftest
from tests.fhir_api.conftest import assert_outcome, live_api, patient


@pytest.fixture(params=["httptools", "h11"])
def limited(request: pytest.FixtureRequest, database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator:
    if request.param == "h11":
        monkeypatch.setattr(conftest, "uvicorn_options", lambda: {
            "http": protocol.FhirH11Protocol, "h11_max_incomplete_event_size": HEAD_CAP})
    else:
        assert protocol.uvicorn_options()["http"] is protocol.FhirHttpToolsProtocol  # the default
    yield from live_api(database_url)


def raw(root: str, head: bytes) -> tuple[int, dict, bytes]:
    """Send `head` over a plain socket; (status, headers, body) of the answer read to the server's close."""
    host, port = root.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as s:
        s.sendall(head)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head_part, _, body = data.partition(b"\r\n\r\n")
    lines = head_part.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


def assert_raw_outcome(answer: tuple[int, dict, bytes], status: int) -> None:
    got, headers, body = answer
    assert got == status, (got, body[:300])
    assert headers["content-type"].startswith("application/fhir+json"), headers
    assert httpx.Response(status, content=body).json()["resourceType"] == "OperationOutcome"


def request(path: str, *headers: bytes) -> bytes:
    return b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + b"".join(
        h + b"\r\n" for h in headers) + b"\r\n"


def test_over_long_urls_and_headers_get_outcomes(limited, tag):
    fhir = httpx.Client(base_url=limited.fhir, timeout=60)
    # just under the limits: served
    near = "/Patient?family=" + "a" * (MAX_URL_BYTES - 100)
    assert fhir.get(near).status_code == 200
    assert fhir.get("/Patient", headers={"X-Big": "a" * (MAX_HEADER_BYTES - 1000)}).status_code == 200
    assert fhir.get("/Patient", headers=[(f"X-{i}", "v") for i in range(MAX_HEADER_FIELDS - 10)]) \
        .status_code == 200
    # over them, by httpx: the app's limits answer
    body = assert_outcome(fhir.get("/Patient?family=" + "a" * MAX_URL_BYTES), 414)
    assert body["issue"][0]["code"] == "too-long" and "_search" in body["issue"][0]["diagnostics"]
    created = fhir.post(f"/Patient?x={'a' * MAX_URL_BYTES}", json=patient(tag))
    assert_outcome(created, 414)
    assert_outcome(fhir.get("/Patient", headers={"X-Big": "a" * MAX_HEADER_BYTES}), 431)
    assert_outcome(fhir.get("/Patient", headers=[(f"X-{i}", "v") for i in range(MAX_HEADER_FIELDS + 1)]), 431)
    assert_outcome(fhir.get("/Patient", headers=[(f"X-{i}", "v") for i in range(5_000)]), 431)
    # far over them (more than the HTTP parser holds, or than httptools can parse): the parser answers
    for path in ("/fhir/Patient?family=" + "a" * 100_000, "/fhir/Patient?family=" + "a" * 3_000_000):
        assert_raw_outcome(raw(limited.root, request(path)), 414)
    assert_raw_outcome(raw(limited.root, request("/fhir/metadata", b"X-Big: " + b"a" * 3_000_000)), 431)
    flood = [b"X-%d: v" % i for i in range(200_000)]
    assert_raw_outcome(raw(limited.root, request("/fhir/metadata", *flood)), 431)
    assert_raw_outcome(raw(limited.root, b"GET /fhir/metadata HTTP/1.1\r\nHost x\r\n\r\n"), 400)
    # the server still serves, and nothing was created
    found = fhir.get("/Patient", params={"identifier": f"urn:test|{tag}"}).json()
    assert not found.get("entry"), found


def test_the_capability_statement_states_the_limits(client):
    text = client.get("/metadata").json()["rest"][0]["documentation"]
    for figure in (MAX_URL_BYTES, MAX_HEADER_FIELDS, MAX_HEADER_BYTES, 64 * 1024, 100, 1000):
        assert str(figure) in text, (figure, text)
